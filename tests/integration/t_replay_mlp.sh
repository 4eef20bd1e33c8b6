#!/usr/bin/env bash
# tierfs-replay --mlp, the MLP-Offload-style scheme `make bench` sets beside
# tierfs: its placement, order and ratio choice against figures worked out
# by hand (--mlp-selftest), then a run of 2 ranks on two plain directories
# that must leave every state file on its own path with the right bytes,
# no gradient file anywhere, only the sub-groups not kept moving in a
# steady step, and never two ranks reading, or writing, at once.
. "$(dirname "$0")/../lib.sh"
REPLAY=$(dirname "$TIERFS_BIN")/tierfs-replay
[ -x "$REPLAY" ] || { echo "# SKIP: $REPLAY not built"; exit 77; }
command -v python3 >/dev/null || { echo "# SKIP: python3 missing"; exit 77; }

"$REPLAY" --mlp-selftest | sed -e 's/^ok [0-9]* - /ok: /' -e 's/^not ok [0-9]* - /NOT OK: /' -e '/^1\.\./d' >"$T/self"
while IFS= read -r l; do
	case $l in
	"ok: "*) ok "selftest: ${l#ok: }" ;;
	*) fail "selftest: ${l#NOT OK: }" ;;
	esac
done <"$T/self"
[ -s "$T/self" ] || fail "--mlp-selftest printed nothing"

# 2 ranks x 8 sub-groups of 1M params (12 MiB of state each); RAM for the
# bf16 gradients (2 x 16 MiB) and 2 kept sub-groups per rank (2 x 2 x 12
# MiB), with 8 MiB to spare.
mkdir -p "$T/d1" "$T/d2"
check "2 ranks, 5 steps on two directories, every file verified" \
	"$REPLAY" --dir "$T/d1" --dir2 "$T/d2" --mlp --mlp-ratio 2 --dir2-cap 1G \
	--host-ram 88M --state-size 192M --ranks 2 --steps 5 --verify \
	--json "$T/r.json" --trace "$T/trace"
check "whole sub-groups per path (ratio 2: even ones on --dir2), no gradient file" python3 - "$T" <<'PY'
import glob, os, sys
t = sys.argv[1]
bad = 0
for r in (0, 1):
    for d, want in (("d1", 0), ("d2", 1)):
        fs = glob.glob("%s/%s/zero_stage_3/optimizer/rank%d/*" % (t, d, r))
        if any("gradient" in f for f in fs):
            print("# gradient file in", d); bad += 1
        sgs = set()
        for f in fs:
            sid = os.path.basename(f).split(".")[0].split("-")[-1]
            sgs.add(int(sid.split("_")[0]) // 4)
        if sgs != {i for i in range(8) if (i % 2 == 0) == want} or len(fs) != 12:
            print("# rank", r, d, "holds sub-groups", sorted(sgs), len(fs), "files"); bad += 1
sys.exit(bad)
PY
check "keep 2: a steady step reads and writes 6 of 8 sub-groups per rank" python3 - "$T/r.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
sg = 12 * j["subgroup_params"]
want = 2 * 6 * sg
got = [(s["bytes_read"], s["bytes_written"]) for s in j["steps"][2:]]
ok = j["mlp"]["keep"] == 2 and j["schedule"] == "mlp" and all(g == (want, want) for g in got)
ok = ok and j["steps"][1]["bytes_read"] == 2 * 8 * sg
print("# keep %d, steps 2..: %s, want %d each way" % (j["mlp"]["keep"], got, want))
sys.exit(0 if ok else 1)
PY
# Transfers in the trace: rank step R|W sub-group start end; the read or
# write lock is held from start to end, so two ranks' reads (or writes)
# never overlap.
lock_ok() {
	awk '$3 != "A" { n++; r[n] = $1; q[n] = $3; s[n] = $5; e[n] = $6 }
	     END { for (i = 1; i <= n; i++) for (k = i + 1; k <= n; k++)
	             if (r[i] != r[k] && q[i] == q[k] && s[i] < e[k] && s[k] < e[i]) bad++
	           print "# " n " transfers, " bad + 0 " overlapping across ranks"
	           exit bad > 0 || n < 60 }' "$T/trace"
}
check "one rank reading, and one writing, at a time" lock_ok
tap_exit
