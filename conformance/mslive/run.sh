#!/usr/bin/env bash
# Runs the live tests that ship in azservicebus v1.11.0's _test.go files
# against `busbar serve`, with their assertions unchanged (docs/conformance.md,
# "Microsoft's live tests").
#
#   conformance/mslive/run.sh [test binary flags, e.g. -test.run TestReceiver -test.v]
#
# It runs the module's two packages with live tests, azservicebus and
# azservicebus/admin, and ends with a summary of passed, failed and skipped
# top-level tests.
#
# The tests are copied at run time from the Go module cache into a
# temporary directory (Microsoft's code is not part of this repository).
# Only the test-credential plumbing is substituted: the Entra ID credential
# becomes one that signs SAS tokens for the namespace. The SDK dials
# amqps://<endpoint> on 5671 and https://<endpoint> on 443 for token
# credentials, so the broker serves TLS on both with a self-signed
# certificate made here, which the test process trusts (SSL_CERT_FILE). The
# endpoint is 127.0.0.2, not 127.0.0.1: TestClientUsingCustomEndpoint
# proves that CustomEndpoint is dialled by failing to reach 127.0.0.1:5671.
# The tests' two namespaces are two brokers: the Standard one on 127.0.0.2
# (`--sku Standard`) and the Premium one on 127.0.0.3 (`--sku Premium
# --max-message-size-kb 102400`).
# Both run in a private network namespace (unshare -n, as root or with user
# namespaces), so ports 443 and 5671 are free whatever else runs here.
#
# BUSBAR_MSLIVE_TIMEOUT (default 20m) bounds the whole go test run.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
ver=v1.11.0
modpath=github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus
cache=$(go env GOMODCACHE)/github.com/!azure/azure-sdk-for-go/sdk/messaging/azservicebus@$ver
if [ ! -d "$cache" ]; then
	(cd "$root" && go mod download "$modpath@$ver")
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/busbar-mslive.XXXXXX")
cleanup() { chmod -R u+w "$work" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# The tests, with the credential substituted.
cp -r "$cache" "$work/azservicebus"
chmod -R u+w "$work/azservicebus"
helpers="$work/azservicebus/internal/test/test_helpers.go"
grep -q 'credential.New(nil)' "$helpers" || { echo "mslive: $helpers no longer calls credential.New(nil); update run.sh" >&2; exit 1; }
sed -i -e '\#"github.com/Azure/azure-sdk-for-go/sdk/internal/test/credential"#d' \
	-e 's/credential\.New(nil)/busbarSASCredential()/' "$helpers"
cp "$root/conformance/mslive/sascredential.go.txt" "$work/azservicebus/internal/test/busbar_sascredential.go"

echo "mslive: building busbar and the azservicebus $ver tests" >&2
(cd "$root" && go build -o "$work/busbar" ./cmd/busbar)
(cd "$work/azservicebus" && GOFLAGS=-mod=mod go test -c -o "$work/azservicebus.test" . &&
	GOFLAGS=-mod=mod go test -c -o "$work/admin.test" ./admin)

# Keys: the root rule and the three of the tests' bicep template.
key() { head -c 32 /dev/urandom | base64; }
root_key=$(key) nomanage_key=$(key) send_key=$(key) listen_key=$(key)
cat >"$work/config.json" <<JSON
{
  "UserConfig": { "Namespaces": [ { "Name": "sbemulatorns", "Queues": [
    { "Name": "testQueue", "Properties": { "LockDuration": "PT5M", "MaxDeliveryCount": 10, "DuplicateDetectionHistoryTimeWindow": "PT10M" } },
    { "Name": "testQueueWithSessions", "Properties": { "LockDuration": "PT5M", "MaxDeliveryCount": 10, "RequiresSession": true, "DuplicateDetectionHistoryTimeWindow": "PT10M" } }
  ], "Topics": [] } ] },
  "Busbar": { "SharedAccessPolicies": [
    { "KeyName": "RootManageSharedAccessKey", "PrimaryKey": "$root_key", "Rights": ["Manage", "Send", "Listen"] },
    { "KeyName": "NoManage", "PrimaryKey": "$nomanage_key", "Rights": ["Send", "Listen"] },
    { "KeyName": "SendOnly", "PrimaryKey": "$send_key", "Rights": ["Send"] },
    { "KeyName": "ListenOnly", "PrimaryKey": "$listen_key", "Rights": ["Listen"] }
  ] }
}
JSON

host=127.0.0.2 premium=127.0.0.3
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
	-subj /CN=busbar-mslive -addext "subjectAltName=IP:$host,IP:$premium" \
	-keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cs() { echo "Endpoint=sb://${3:-$host}/;SharedAccessKeyName=$1;SharedAccessKey=$2"; }
export AZURE_RECORD_MODE=live
export SERVICEBUS_ENDPOINT=$host SERVICEBUS_ENDPOINT_PREMIUM=$premium
export SERVICEBUS_CONNECTION_STRING="$(cs RootManageSharedAccessKey "$root_key")"
export SERVICEBUS_CONNECTION_STRING_PREMIUM="$(cs RootManageSharedAccessKey "$root_key" "$premium")"
export SERVICEBUS_CONNECTION_STRING_NO_MANAGE="$(cs NoManage "$nomanage_key")"
export SERVICEBUS_CONNECTION_STRING_SEND_ONLY="$(cs SendOnly "$send_key")"
export SERVICEBUS_CONNECTION_STRING_LISTEN_ONLY="$(cs ListenOnly "$listen_key")"
export BUSBAR_LIVE_KEY_NAME=RootManageSharedAccessKey BUSBAR_LIVE_KEY="$root_key"
export SSL_CERT_FILE="$work/cert.pem"
export BUSBAR_MSLIVE_WORK="$work" BUSBAR_MSLIVE_HOST="$host" BUSBAR_MSLIVE_PREMIUM="$premium" BUSBAR_MSLIVE_TIMEOUT="${BUSBAR_MSLIVE_TIMEOUT:-20m}"

# Inside the private network namespace: start the broker, wait for its
# certificate and ports, run the tests, stop the broker.
inner='
set -euo pipefail
ip link set lo up
w=$BUSBAR_MSLIVE_WORK
pids=()
start() { # start SKU HOST [FLAGS]: one broker, waiting until it listens
	"$w/busbar" serve --sku "$1" "${@:3}" --config "$w/config.json" --data "$w/data-$1" --tls-cert "$w/cert.pem" --tls-key "$w/key.pem" \
		--amqp "$2:5672" --amqps "$2:5671" --http "$2:443" --http-tls \
		--log-level "${BUSBAR_MSLIVE_LOG_LEVEL:-warn}" >"$w/busbar-$1.out" 2>"$w/busbar-$1.log" &
	pids+=($!)
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/$2/5671") 2>/dev/null && (exec 3<>"/dev/tcp/$2/443") 2>/dev/null; then return; fi
		kill -0 $! 2>/dev/null || { echo "mslive: busbar ($1) exited:" >&2; cat "$w/busbar-$1.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "mslive: busbar ($1) did not listen on $2" >&2; exit 1
}
start Standard "$BUSBAR_MSLIVE_HOST"
# Premium entities may allow messages of up to 100 MB (the default stays 1 MB).
start Premium "$BUSBAR_MSLIVE_PREMIUM" --max-message-size-kb 102400
status=0
(cd "$w/azservicebus" && "$w/azservicebus.test" -test.timeout "$BUSBAR_MSLIVE_TIMEOUT" "$@") || status=$?
(cd "$w/azservicebus/admin" && "$w/admin.test" -test.timeout "$BUSBAR_MSLIVE_TIMEOUT" "$@") || status=$?
kill -TERM "${pids[@]}"; wait "${pids[@]}" || true
if [ -n "${BUSBAR_MSLIVE_KEEP_LOG:-}" ]; then cat "$w"/busbar-*.log >"$BUSBAR_MSLIVE_KEEP_LOG"; fi
exit $status
'
exec_args=(unshare -n)
if [ "$(id -u)" != 0 ]; then exec_args=(unshare -rn); fi
set +e
"${exec_args[@]}" bash -c "$inner" mslive -test.v "$@" | tee "$work/results.txt"
status=${PIPESTATUS[0]}
set -e
for r in PASS FAIL SKIP; do
	printf 'mslive: %s %d top-level tests (%d with subtests)\n' "$r" \
		"$(grep -c "^--- $r" "$work/results.txt")" "$(grep -c -- "--- $r" "$work/results.txt")"
done
grep -- "--- SKIP" "$work/results.txt" | sed 's/^ */mslive: /' || true
grep "^--- FAIL" "$work/results.txt" | sed 's/^/mslive: /' || true
exit $status
