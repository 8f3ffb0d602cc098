#!/bin/sh
# The exec action provision-db of the example: DatabaseCluster resources.
# See world.sh for what it does and where.
. "$(dirname "$0")/world.sh"

# outputs: where clients connect, as a real provider would report it.
outputs() {
	engine=$(spec_value engine)
	port=3306
	[ "$engine" = postgres ] && port=5432
	printf '{"endpoint":"%s.db.internal.example.com:%s","engine":"%s","version":"%s","generation":%s}\n' \
		"$name" "$port" "$engine" "$(spec_value engine_version)" "$NO8S_RESOURCE_GENERATION"
}

main
