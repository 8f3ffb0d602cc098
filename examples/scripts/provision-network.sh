#!/bin/sh
# The exec action provision-network of the example: Network resources.
# See world.sh for what it does and where.
. "$(dirname "$0")/world.sh"

# outputs: a network id made from the agent's resource id, and the address
# range and region echoed.
outputs() {
	printf '{"networkId":"net-%06d","cidr":"%s","region":"%s"}\n' \
		"$NO8S_RESOURCE_ID" "$(spec_value cidr)" "$(spec_value region)"
}

main
