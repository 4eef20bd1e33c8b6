#!/usr/bin/env bash
# The man pages: tierfs(8), tierfs.conf(5) and tierfs-update(1) render
# without a mandoc warning; the config keys the parser knows (tierfs
# --list-keys, the table in fs/config/) are exactly those tierfs.conf(5)
# documents, section by section, and no other page documents a key;
# --help and --version fit on one screen and name the example configs.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/common.sh"
[ -x "$TIERFS_BIN" ] || { echo "# SKIP: no daemon at $TIERFS_BIN"; exit 77; }
require_cmd mandoc
MAN=$(cd "$(dirname "$0")/../../docs/man" && pwd)

for p in tierfs.8 tierfs.conf.5 tierfs-update.1; do
	if [ ! -f "$MAN/$p" ]; then
		fail "$p: missing"
		continue
	fi
	out=$(mandoc -T lint -W warning "$MAN/$p" 2>&1)
	[ -z "$out" ] && ok "$p: mandoc -T lint -W warning is clean" ||
		{ fail "$p: mandoc warnings"; echo "$out" | sed 's/^/# /'; }
	mandoc -T utf8 "$MAN/$p" >"$T/$p.txt" 2>&1 && [ -s "$T/$p.txt" ] &&
		ok "$p: renders" || fail "$p: does not render"
done

# The keys tierfs.conf(5) documents: ".It Cm KEY" under ".Ss [SECTION ...]".
awk '
	/^\.Ss "?\[/ { s = $2; gsub(/["\[\]]/, "", s); next }
	/^\.S[sh] / { s = ""; next }
	s != "" && /^\.It Cm [a-z_]+/ { print s, $3 }
' "$MAN/tierfs.conf.5" | sort -u >"$T/documented"
"$TIERFS_BIN" --list-keys | sort -u >"$T/parsed"
[ -s "$T/parsed" ] && ok "tierfs --list-keys: $(wc -l <"$T/parsed") keys" ||
	fail "tierfs --list-keys printed nothing"
if cmp -s "$T/parsed" "$T/documented"; then
	ok "tierfs.conf(5) documents exactly the keys the parser knows"
else
	fail "tierfs.conf(5) and the parser's keys differ"
	comm -23 "$T/parsed" "$T/documented" | sed 's/^/# known to the parser, not in tierfs.conf(5): /'
	comm -13 "$T/parsed" "$T/documented" | sed 's/^/# in tierfs.conf(5), unknown to the parser: /'
fi

# No other page documents a key (it refers to tierfs.conf(5)).
for p in tierfs.8 tierfs-update.1; do
	keys=$(cut -d' ' -f2 "$T/parsed" | sort -u)
	found=$(for k in $keys; do grep -E "^\.It Cm $k( |$)" "$MAN/$p" >/dev/null && echo "$k"; done)
	[ -z "$found" ] && ok "$p documents no config key" ||
		fail "$p documents config keys: $(echo $found)"
done

# --help and --version: one screen (24 lines of 80 columns), the examples.
for o in --help --version; do
	"$TIERFS_BIN" $o >"$T/out" 2>&1 || fail "$o: exit status"
	lines=$(wc -l <"$T/out")
	cols=$(awk '{ if (length > m) m = length } END { print m + 0 }' "$T/out")
	[ "$lines" -le 24 ] && [ "$cols" -le 80 ] && ok "$o: $lines lines, $cols columns" ||
		fail "$o: $lines lines, $cols columns: more than a screen"
	grep -q "^Example configs: /.*examples" "$T/out" && ok "$o names the example configs" ||
		fail "$o: no example config path"
done
tap_exit
