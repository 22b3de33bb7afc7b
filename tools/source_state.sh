#!/bin/sh
# Prints "<commit> <clean|dirty>" for the checkout at $1; Meson's vcs_tag embeds it.
cd "$1" 2>/dev/null || { echo "unknown unknown"; exit 0; }
commit=$(git rev-parse HEAD 2>/dev/null) || { echo "unknown unknown"; exit 0; }
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then state=dirty; else state=clean; fi
echo "$commit $state"
