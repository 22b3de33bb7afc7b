#!/bin/sh
# Planted faulty ws1-exec-v1 workers without numpy (test/backend/exec_cli_test.py): each MODE
# breaks the protocol in one way, and ws1check must fail the way docs/external-backend.md says.
#   crash          exits at the handshake with a line on stderr       -> exit 3, stderr quoted
#   silent         never answers the hello                            -> exit 3 after the time-out
#   other_version  answers with a hello of protocol ws1-exec-v2       -> exit 3
#   hang           answers the hello, never the request               -> red cell (time-out);
#                  writes its pid and its child's to $PLANTED_PIDS
#   exit           answers the hello, exits on the request            -> red cell (exit status)
#   malformed      answers the request with a line that is not JSON   -> red cell
#   missing_field  answers the request without kernel_id             -> red cell
HELLO='{"type":"hello","protocol":"ws1-exec-v1","backend":"planted","ops":{"silu":{"forward":"planted.silu.forward"}},"readback":{"device":"none","tf32_enabled":null}}'
case "$1" in
  crash) echo "planted: cannot load libfoo.so: no such file" >&2; exit 1 ;;
  silent) sleep 600; exit 0 ;;
  other_version) read -r line; echo '{"type":"hello","protocol":"ws1-exec-v2","backend":"planted"}' ;;
esac
read -r line
echo "$HELLO"
read -r line
case "$1" in
  hang) sleep 600 & [ -z "$PLANTED_PIDS" ] || echo "$$ $!" > "$PLANTED_PIDS"; wait ;;
  exit) echo "planted: segmentation fault in the silu kernel" >&2; exit 7 ;;
  malformed) echo "Traceback (most recent call last): not a protocol line" ;;
  missing_field) echo '{"type":"result","id":1,"output_file":"/nowhere","readback":{"device":"none","tf32_enabled":null}}' ;;
esac
read -r line
