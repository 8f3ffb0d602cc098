# Shared by the example's action scripts, which source it. They pretend to
# provision things; the world they change is a folder, NO8S_EXAMPLE_WORLD
# (default .no8s/example-world, relative to the folder the agent runs the
# command in), with one file per resource, <Kind>/<name>.json, holding the
# spec last applied. Look at it with ls and cat; delete or edit a file to
# play the part of drift.
#
# The agent passes the request as JSON on stdin and in NO8S_* environment
# variables; the command gets PATH, HOME and the instance's env setting,
# nothing else of the agent's environment. stdout is the outputs (one JSON
# value, or nothing), logs go to stderr, and the exit code decides: 0 is
# success; for plan, 0 means no changes and 2 means changes.

set -eu

if [ "${NO8S_RESOURCE_SPEC_OMITTED:-}" = 1 ]; then
	# Specs over 32 KiB come on stdin only, which sh cannot parse.
	echo "the spec is too large for the example scripts" >&2
	exit 1
fi

kind=$NO8S_RESOURCE_KIND
name=$NO8S_RESOURCE_NAME
spec=$NO8S_RESOURCE_SPEC
state=${NO8S_EXAMPLE_WORLD:-.no8s/example-world}/$kind/$name.json

log() { printf '%s\n' "$*" >&2; }

# spec_value KEY prints a top-level string, number or boolean of the spec.
# The agent passes the spec as canonical JSON (sorted keys, no spaces), so
# sed is enough: drop the outer braces and every nested list and object,
# then pick the key. A value with other characters than these prints nothing.
spec_value() {
	printf '%s\n' "$spec" | sed -n -e 's/^{//' -e 's/}$/,/' \
		-e :a -e 's/[[{][^][{}]*[]}]//' -e ta \
		-e "s|.*\"$1\":\"\{0,1\}\([A-Za-z0-9._:/-]*\)\"\{0,1\},.*|\1|p"
}

# main does what NO8S_OPERATION asks. The sourcing script defines outputs,
# which prints the outputs of an apply.
main() {
	case $NO8S_OPERATION in
	apply)
		mkdir -p "${state%/*}"
		# Write, then rename: a reader never sees half a file.
		printf '%s\n' "$spec" >"$state.tmp"
		mv "$state.tmp" "$state"
		log "$kind/$name: applied generation $NO8S_RESOURCE_GENERATION (${NO8S_TRIGGER:-by hand})"
		outputs
		;;
	destroy)
		rm -f "$state"
		log "$kind/$name: destroyed"
		;;
	plan)
		# stdout is the plan; its first line is the summary.
		if [ ! -f "$state" ]; then
			printf '%s\n' "$kind/$name does not exist; apply creates it"
			exit 2
		fi
		current=$(cat "$state")
		if [ "$current" != "$spec" ]; then
			printf '%s\n' "$kind/$name differs; apply updates it" "- $current" "+ $spec"
			exit 2
		fi
		printf '%s\n' "no changes"
		;;
	*)
		log "unknown operation ${NO8S_OPERATION}"
		exit 1
		;;
	esac
}
