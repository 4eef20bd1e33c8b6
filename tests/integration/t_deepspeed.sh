#!/usr/bin/env bash
# Real DeepSpeed (ZeRO stage 3, optimizer and parameters offloaded to NVMe)
# trains with nvme_path on a tierfs mount exactly as on a plain directory:
# every step's loss bit-identical, every swap file byte-identical, with
# eviction and write-back during the run; with and without DeepSpeed's
# pipelined swapping. scripts/e2e/run.sh does the work (make e2e).
#
# It runs in the plain build's lane only: it costs minutes, and what it
# checks (the bytes DeepSpeed gets back) does not depend on the sanitizers;
# the other lanes report SKIP. Without tests/run.sh (TEST_BUILDS unset)
# it runs in any build. DeepSpeed that cannot be installed (no PyPI) or
# built here is a SKIP with the reason, never a pass.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
require_tierfs
if [ -n "${TEST_BUILDS:-}" ] && [ -n "${TIERFS_BUILD:-}" ]; then
	first=${TEST_BUILDS%% *}
	if [ "$(basename "$TIERFS_BUILD")" != "$(basename "$first")" ]; then
		echo "1..0 # SKIP runs in the $first lane only (DeepSpeed's minutes once are enough)"
		exit 77
	fi
fi
E2E_DIR=$T "$(dirname "$0")/../../scripts/e2e/run.sh"
exit $?  # (not exec: lib.sh's trap removes $T)
