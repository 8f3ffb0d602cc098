#!/bin/sh
# The exec action publish-dns of the example: DNSRecord resources.
# See world.sh for what it does and where.
. "$(dirname "$0")/world.sh"

# outputs: the record's full name, as resolvers will see it.
outputs() {
	ttl=$(spec_value ttl)
	printf '{"fqdn":"%s.%s","type":"%s","ttl":%s}\n' \
		"$name" "$(spec_value zone)" "$(spec_value type)" "${ttl:-null}"
}

main
