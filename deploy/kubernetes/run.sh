#!/usr/bin/env bash
# Run backfill's phases on a cluster, in order, each once the one before it
# has completed:
#
#   deploy/kubernetes/run.sh [KUSTOMIZATION]   (default: deploy/kubernetes/example)
#
# It applies the kustomization (every Job is created suspended, so nothing
# starts there), then starts plan, map, check, schema (with the postgres
# component) and load in turn, and waits for each to complete. A Job that
# already completed is not started again, so after a failure, mend its
# cause, delete the failed Job (kubectl delete job NAME -n NAMESPACE) and
# run the script again: it makes that Job anew and goes on from there.
#
# Exit status: 0 all phases completed, no reject in the corpus; 1 a phase
# failed (its pods' last lines are printed); 2 usage; 3 all phases
# completed and the corpus has rejects (check's summary above says which).
set -euo pipefail

dir=${1:-$(dirname "$0")/example}
timeout=${BACKFILL_PHASE_TIMEOUT:-24h}
kubectl=${KUBECTL:-kubectl}
if [ ! -f "$dir/kustomization.yaml" ]; then
	echo "run.sh: $dir has no kustomization.yaml" >&2
	exit 2
fi
ns=$($kubectl kustomize "$dir" | awk '$1 == "namespace:" { print $2; exit }')
ns=${ns:-default}
k() { $kubectl -n "$ns" "$@"; }

# condition JOB prints Complete or Failed once the Job has one, else nothing.
condition() {
	k get job "$1" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{"\n"}{end}' |
		grep -E '^(Complete|Failed)$' | head -n 1 || true
}

# Created, never applied again: applying would suspend again the Jobs
# started since. What is there already is left as it is (to change the
# settings of a run, delete it first: kubectl delete -k DIR).
out=$($kubectl kustomize "$dir" | $kubectl create -f - 2>&1) || true
if grep -v AlreadyExists <<<"$out" | grep -qiE 'error|invalid|forbidden'; then
	echo "$out" >&2
	exit 1
fi
rejects=0
for phase in plan map check schema load; do
	job=backfill-$phase
	k get job "$job" >/dev/null 2>&1 || continue # schema: PostgreSQL only
	state=$(condition "$job")
	if [ "$state" = Complete ]; then
		echo "run.sh: $job completed before; not run again"
	elif [ "$state" = Failed ]; then
		echo "run.sh: $job failed before: delete it (kubectl delete job $job -n $ns) and run again" >&2
		exit 1
	else
		echo "run.sh: starting $job"
		k patch job "$job" --type=merge -p '{"spec":{"suspend":false}}' >/dev/null
		# Wait for whichever comes first: complete or failed.
		k wait --for=condition=Complete "job/$job" --timeout="$timeout" >/dev/null 2>&1 &
		done_pid=$!
		k wait --for=condition=Failed "job/$job" --timeout="$timeout" >/dev/null 2>&1 &
		fail_pid=$!
		wait -n "$done_pid" "$fail_pid" || true
		kill "$done_pid" "$fail_pid" 2>/dev/null || true
		state=$(condition "$job")
		if [ "$state" != Complete ]; then
			echo "run.sh: $job did not complete (${state:-timed out after $timeout}); its pods' last lines:" >&2
			k logs -l "job-name=$job" --tail=20 --prefix >&2 || true
			exit 1
		fi
		echo "run.sh: $job completed"
	fi
	if [ "$phase" = check ]; then
		summary=$(k logs "job/$job")
		echo "$summary"
		rejects=$(awk '$1 == "rejects" { print $2; exit }' <<<"$summary")
	fi
done
if [ "${rejects:-0}" != 0 ]; then
	echo "run.sh: every phase completed; the corpus has $rejects rejects (records under the output's dead-letters/)"
	exit 3
fi
echo "run.sh: every phase completed"
