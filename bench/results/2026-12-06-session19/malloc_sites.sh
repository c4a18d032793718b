#!/usr/bin/env bash
# Session 19's malloc count, now maintained as bench/malloc_sites.sh (same defaults).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../../malloc_sites.sh" "$@"
