#!/usr/bin/env bash
# Run Busbar and its peers (RabbitMQ, NATS JetStream, PostgreSQL) through the
# same workloads, one after another, on this machine and on loopback only,
# then print markdown tables and write PNG charts. Every result carries the
# broker's and the load generator's CPU per message (from /proc).
#
#   bench/run.sh            # W2, W4 and the latency workload (about 20 minutes)
#   bench/run.sh --quick    # a smoke run: every broker and workload, 2 s each
#   bench/run.sh --only busbar,postgres
#
# Environment: OUT (results directory, default bench/results/latest),
# CHARTS (PNG directory, default docs/benchmarks), DURATION (seconds per
# timed run), KEYS (sessions of W4), W4_RUNS (runs of W4 per series,
# default 5: the median is reported), W4_PAIRS (W4 on Busbar and on
# PostgreSQL in alternation, default 5 pairs; 0: none), WORKLOADS (default "w2 w4 lat5k";
# also 1p1c, rate1000, rate5000), CLIENTS (Busbar's clients, default
# "raw amqp sdk").
#
# Every broker is started by this script with its data in a temporary
# directory, on 127.0.0.1 and a port of its own, and stopped by its PID.
# Packages missing from the machine are installed with apt-get (as root);
# nats-server is built with `go install` at a pinned version because
# Debian's 2.9.10 has no sync_interval setting.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

QUICK=0
ONLY="busbar,rabbitmq,nats,postgres"
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--only) ONLY=$2; shift ;;
	-h | --help) sed -n '2,21p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done

if [ "$QUICK" = 1 ]; then
	DURATION=${DURATION:-2}
	KEYS=${KEYS:-1000}
	W4_RUNS=${W4_RUNS:-1}
	W4_PAIRS=${W4_PAIRS:-1}
else
	DURATION=${DURATION:-60}
	KEYS=${KEYS:-10000}
	W4_RUNS=${W4_RUNS:-5}
	W4_PAIRS=${W4_PAIRS:-5}
fi
OUT=${OUT:-$ROOT/bench/results/latest}
CHARTS=${CHARTS:-$ROOT/docs/benchmarks}
NATS_VERSION=v2.15.2
BIN=$ROOT/bench/.bin
WORK=$(mktemp -d /tmp/busbar-bench.XXXXXX)
mkdir -p "$OUT" "$BIN"
rm -rf "$OUT"/*.json "$OUT"/*.log "$OUT"/*.runs "$OUT"/pairs

# Ports of our own, away from the defaults other instances may be using.
# Each can be overridden from the environment.
BUSBAR_AMQP=${BUSBAR_AMQP:-127.0.0.1:25672} BUSBAR_HTTP=${BUSBAR_HTTP:-127.0.0.1:25300}
RABBIT_PORT=${RABBIT_PORT:-25673} RABBIT_DIST=${RABBIT_DIST:-25674} EPMD_PORT=${EPMD_PORT:-24369}
NATS_PORT=${NATS_PORT:-24222} PG_PORT=${PG_PORT:-25432}

want() { case ",$ONLY," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
log() { printf '\n== %s\n' "$*" >&2; }

# ---------------------------------------------------------------- processes
BROKER_PID=""
stop_broker() {
	[ -n "$BROKER_PID" ] || return 0
	if kill -0 "$BROKER_PID" 2>/dev/null; then
		kill -TERM "$BROKER_PID" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.2; done
		kill -0 "$BROKER_PID" 2>/dev/null && kill -KILL "$BROKER_PID" 2>/dev/null || true
	fi
	BROKER_PID=""
}
EXTRA_STOP=""
BUSBAR_PIDS=() # every busbar serve start_busbar started, stopped on exit whatever happened
cleanup() {
	[ -n "$EXTRA_STOP" ] && eval "$EXTRA_STOP" || true
	local p live
	live=$(jobs -p) # still this script's: a node stopped and waited for is not, and its pid may be another's now
	for p in "${BUSBAR_PIDS[@]}"; do grep -qx "$p" <<<"$live" && kill -TERM "$p" 2>/dev/null || true; done
	stop_broker
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for CMD...: retry CMD for up to 60 s.
wait_for() {
	for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
	return 1
}

# ------------------------------------------------------------------ install
install_pkgs() {
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ]; then
		echo "run.sh: missing packages ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root" >&2
		return 1
	fi
	log "apt-get install ${missing[*]}"
	apt-get update -qq
	# The packages' own services are not wanted: this script runs private instances.
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

log "building busbar, peerbench and benchreport"
go build -o "$BIN/busbar" ./cmd/busbar
(cd bench && go build -o "$BIN/peerbench" ./cmd/peerbench && go build -o "$BIN/benchreport" ./cmd/benchreport)

# --------------------------------------------------------------- workloads
# Each workload is a name and the flags both `busbar bench` and peerbench
# take. w2 and w4 are the broker issue's W2 and W4; lat5k is its latency
# target (p99 at 5,000 msg/s, one producer, one consumer).
declare -A WL
WL[w2]="--producers 4 --consumers 4 --inflight 16 --duration ${DURATION}s"
WL[w4]="--keys $KEYS --per-key 10 --producers 4 --inflight 4 --batch 10 --consumers 4 --drain-timeout 300s"
WL[lat5k]="--rate 5000 --producers 1 --consumers 1 --inflight 16 --duration ${DURATION}s"
WL[1p1c]="--producers 1 --consumers 1 --inflight 16 --duration ${DURATION}s"
WL[rate1000]="--rate 1000 --producers 4 --inflight 16 --consumers 4 --duration ${DURATION}s"
WL[rate5000]="--rate 5000 --producers 4 --inflight 16 --consumers 4 --duration ${DURATION}s"
WORKLOADS=${WORKLOADS:-w2 w4 lat5k}
CLIENTS=${CLIENTS:-raw amqp sdk}
for w in $WORKLOADS; do [ -n "${WL[$w]:-}" ] || { echo "run.sh: unknown workload $w" >&2; exit 2; }; done

# run_all SERIES WORKLOADS CMD...: run each of WORKLOADS with CMD, writing
# JSON and logs. W4 (100,000 messages, a second or two) is run W4_RUNS
# times and the run with the median rate is reported: single runs of it
# varied by a third between back-to-back runs on this shared 2-core
# machine. Every run's rate and broker CPU is kept in SERIES__w4.runs.
# Every run waits for its broker to be idle and for the system's dirty
# pages to be written back (--wait-idle) before it is measured, so that
# no run pays for the writes of the one before.
run_all() {
	local series=$1 workloads=$2; shift 2
	for w in $workloads; do
		local n=1 i out=$OUT/${series}__$w
		[ "$w" = w4 ] && n=$W4_RUNS
		rm -f "$out.log" "$out.runs"
		for i in $(seq "$n"); do
			log "$series: $w ($i/$n)"
			# shellcheck disable=SC2086
			if ! "$@" ${WL[$w]} --name "$w" --size 1024 --json --broker-pid "$BROKER_PID" --wait-idle "$BROKER_PID" \
				>"$out.json.$i" 2> >(tee -a "$out.log" | tail -n 3 >&2); then
				echo "run.sh: $series $w failed (see $out.log)" >&2
				rm -f "$out.json.$i"
				continue
			fi
			echo "$(json_num msgs_per_sec "$out.json.$i") $(json_num broker_cpu_us_per_msg "$out.json.$i") $i" >>"$out.runs"
		done
		[ -s "$out.runs" ] || continue
		# The median run by rate (the lower middle one for an even count).
		local pick
		pick=$(awk 'NF == 3' "$out.runs" | sort -n | awk '{r[NR]=$3} END {print r[int((NR+1)/2)]}')
		[ -n "$pick" ] || continue
		mv "$out.json.$pick" "$out.json"
		rm -f "$out".json.[0-9]*
	done
}

# json_num FIELD FILE: the number FIELD holds in the JSON FILE (-1, a
# figure not measured, included).
json_num() { grep -o "\"$1\": *-\?[0-9.eE+-]*" "$2" | head -n 1 | sed 's/.*: *//'; }

# start_busbar NAME SERVE_ARGS...: starts `busbar serve` with its data in
# $WORK/NAME, waits until it listens, and sets BUSBAR_PID and BUSBAR_CS (its
# connection string).
start_busbar() {
	local name=$1
	shift
	"$BIN/busbar" serve --data "$WORK/$name" "$@" --log-level warn >"$WORK/$name.out" 2>"$WORK/$name.err" &
	BUSBAR_PID=$!
	BUSBAR_PIDS+=("$BUSBAR_PID")
	wait_for grep -q 'Endpoint=' "$WORK/$name.out"
	BUSBAR_CS=$(grep -o 'Endpoint=[^ ]*' "$WORK/$name.out" | head -n 1)
}

# ------------------------------------------------------------------- busbar
if want busbar; then
	log "busbar: starting"
	start_busbar busbar --amqp "$BUSBAR_AMQP" --http "$BUSBAR_HTTP"
	BROKER_PID=$BUSBAR_PID CS=$BUSBAR_CS
	BB=("$BIN/busbar" bench --connection-string "$CS" --create --admin "$BUSBAR_HTTP" --broker-label "busbar $(git describe --always --dirty 2>/dev/null || echo dev)")
	for client in $CLIENTS; do
		run_all "busbar-$client" "$(echo " $WORKLOADS " | sed 's/ lat5k / /g')" "${BB[@]}" --client "$client"
		# The latency workload is the SDK's target; the lean clients run
		# the throughput workloads. Its consumer takes what has arrived as
		# soon as a message is there (the SDK's TimeAfterFirstMessage at
		# 1 µs) instead of gathering for the bench's default millisecond,
		# which at 5,000 msg/s made the median a millisecond and a half.
		if [ "$client" = sdk ] && [[ " $WORKLOADS " == *" lat5k "* ]]; then
			run_all busbar-sdk lat5k "${BB[@]}" --client sdk --receive-wait 1us
		fi
	done
	stop_broker
fi

# ----------------------------------------------------------------- rabbitmq
if want rabbitmq && install_pkgs rabbitmq-server; then
	log "rabbitmq: starting"
	R=$WORK/rabbitmq
	mkdir -p "$R/mnesia" "$R/log"
	echo "[]." >"$R/enabled_plugins"
	printf 'loopback_users = none\n' >"$R/rabbitmq.conf"
	export RABBITMQ_NODENAME=bench@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT=$RABBIT_PORT RABBITMQ_DIST_PORT=$RABBIT_DIST \
		ERL_EPMD_PORT=$EPMD_PORT ERL_EPMD_ADDRESS=127.0.0.1 \
		RABBITMQ_MNESIA_BASE=$R/mnesia RABBITMQ_LOG_BASE=$R/log \
		RABBITMQ_ENABLED_PLUGINS_FILE=$R/enabled_plugins RABBITMQ_PID_FILE=$R/pid \
		RABBITMQ_CONFIG_FILE=$R/rabbitmq ERL_CRASH_DUMP=$R/erl_crash.dump
	HOME=$R /usr/lib/rabbitmq/bin/rabbitmq-server >"$R/server.out" 2>&1 &
	LAUNCHER=$!
	EXTRA_STOP="HOME=$R /usr/lib/rabbitmq/bin/rabbitmqctl -n bench@localhost stop >/dev/null 2>&1; kill $LAUNCHER 2>/dev/null; /usr/lib/erlang/bin/epmd -kill >/dev/null 2>&1"
	wait_for test -s "$R/pid"
	HOME=$R wait_for /usr/lib/rabbitmq/bin/rabbitmqctl -n bench@localhost await_startup
	BROKER_PID=$(cat "$R/pid")
	run_all rabbitmq "$WORKLOADS" "$BIN/peerbench" --broker rabbitmq --url "amqp://guest:guest@127.0.0.1:$RABBIT_PORT/"
	eval "$EXTRA_STOP"
	EXTRA_STOP=""
	stop_broker
fi

# --------------------------------------------------------------------- nats
if want nats; then
	if [ ! -x "$BIN/nats-server-$NATS_VERSION" ]; then
		log "nats: go install github.com/nats-io/nats-server/v2@$NATS_VERSION"
		GOBIN=$WORK/gobin go install "github.com/nats-io/nats-server/v2@$NATS_VERSION"
		mv "$WORK/gobin/nats-server" "$BIN/nats-server-$NATS_VERSION"
	fi
	for mode in default always; do
		series=nats
		sync=""
		flag=""
		if [ "$mode" = always ]; then series=nats-sync-always sync="sync_interval: always" flag=--nats-sync-always; fi
		log "$series: starting"
		N=$WORK/$series
		mkdir -p "$N"
		printf 'listen: 127.0.0.1:%s\njetstream {\n  store_dir: "%s"\n  %s\n}\n' "$NATS_PORT" "$N/js" "$sync" >"$N/nats.conf"
		"$BIN/nats-server-$NATS_VERSION" -c "$N/nats.conf" >"$N/server.log" 2>&1 &
		BROKER_PID=$!
		wait_for bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT"
		# shellcheck disable=SC2086
		run_all "$series" "$WORKLOADS" "$BIN/peerbench" --broker nats --url "nats://127.0.0.1:$NATS_PORT" $flag
		stop_broker
	done
fi

# w4_pairs: W4 on Busbar (lean client) and on PostgreSQL in alternation,
# W4_PAIRS pairs, each broker idle while the other runs (and both idle
# before each run: --wait-idle), who goes first alternating. The brokers
# above run one after the other, minutes apart, and the machine's speed
# drifts between them; a pair's two runs are seconds apart. Busbar is a fresh
# node warmed as PostgreSQL's node is by its section: W2, then W4 W4_RUNS times. Each run's result
# goes to $OUT/pairs/<pair>__<series>.json; benchreport prints the pairs and
# the medians of their ratios.
w4_pairs() {
	log "w4 pairs: busbar (raw client) and postgres in alternation"
	local pg_pid=$BROKER_PID amqp=127.0.0.1:${BUSBAR_PAIR_AMQP:-25682} http=127.0.0.1:${BUSBAR_PAIR_HTTP:-25310}
	start_busbar busbar-pairs --amqp "$amqp" --http "$http"
	local bb_pid=$BUSBAR_PID cs=$BUSBAR_CS i
	# The same history as PostgreSQL's node has by now (its section: W2,
	# then W4 W4_RUNS times), so that neither runs the pairs on a fresher
	# store than the other.
	"$BIN/busbar" bench --connection-string "$cs" --create --admin "$http" --client raw ${WL[w2]} \
		--size 1024 --broker-pid "$bb_pid" >/dev/null 2>&1 || true
	for i in $(seq "$W4_RUNS"); do
		# shellcheck disable=SC2086
		"$BIN/busbar" bench --connection-string "$cs" --create --admin "$http" --client raw ${WL[w4]} \
			--size 1024 --broker-pid "$bb_pid" >/dev/null 2>&1 || true
	done
	mkdir -p "$OUT/pairs"
	pair_busbar() {
		# shellcheck disable=SC2086
		"$BIN/busbar" bench --connection-string "$cs" --create --admin "$http" --client raw ${WL[w4]} --name w4 \
			--size 1024 --json --broker-pid "$bb_pid" --wait-idle "$bb_pid,$pg_pid" >"$WORK/pair.json" 2>>"$OUT/w4-pairs.log" &&
			mv "$WORK/pair.json" "$OUT/pairs/${1}__busbar-raw.json"
	}
	pair_postgres() {
		# shellcheck disable=SC2086
		"$BIN/peerbench" --broker postgres --url "postgres://bench@127.0.0.1:$PG_PORT/bench?sslmode=disable" ${WL[w4]} --name w4 \
			--size 1024 --json --broker-pid "$pg_pid" --wait-idle "$bb_pid,$pg_pid" >"$WORK/pair.json" 2>>"$OUT/w4-pairs.log" &&
			mv "$WORK/pair.json" "$OUT/pairs/${1}__postgres.json"
	}
	for i in $(seq "$W4_PAIRS"); do
		# Who goes first alternates: a run a few seconds later can find
		# the machine faster or slower, and the order must not decide.
		if [ $((i % 2)) = 1 ]; then
			pair_busbar "$i" && pair_postgres "$i" || continue
		else
			pair_postgres "$i" && pair_busbar "$i" || continue
		fi
	done
	kill -TERM "$bb_pid" 2>/dev/null; wait "$bb_pid" 2>/dev/null || true
}


# ----------------------------------------------------------------- postgres
if want postgres && install_pkgs postgresql; then
	PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	P=$(mktemp -d /tmp/busbar-bench-pg.XXXXXX)
	RUNAS=()
	if [ "$(id -u)" = 0 ]; then chown postgres "$P"; RUNAS=(runuser -u postgres --); fi
	log "postgres: initdb and start ($PGBIN)"
	"${RUNAS[@]}" "$PGBIN/initdb" -D "$P/data" -U bench --auth=trust >"$P/initdb.log"
	"${RUNAS[@]}" "$PGBIN/postgres" -D "$P/data" -p "$PG_PORT" -k "$P" -c listen_addresses=127.0.0.1 \
		-c fsync=on -c synchronous_commit=on -c max_connections=200 >"$P/server.log" 2>&1 &
	EXTRA_STOP="rm -rf $P"
	wait_for psql -h 127.0.0.1 -p "$PG_PORT" -U bench -d postgres -c 'select 1'
	BROKER_PID=$(head -n 1 "$P/data/postmaster.pid")
	psql -q -h 127.0.0.1 -p "$PG_PORT" -U bench -d postgres -c 'CREATE DATABASE bench'
	# pg_usage LABEL: PostgreSQL's committed transactions and WAL bytes since
	# the previous call, appended to $OUT/postgres-usage.txt (divide by the
	# run's messages for transactions and bytes per message).
	PG_MARK=""
	pg_usage() {
		local now
		now=$(psql -Atq -h 127.0.0.1 -p "$PG_PORT" -U bench -d postgres -c \
			"SELECT sum(xact_commit)::bigint || ' ' || pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint FROM pg_stat_database")
		if [ -n "$PG_MARK" ] && [ -n "$1" ]; then
			echo "${now%% *} ${PG_MARK%% *} ${now##* } ${PG_MARK##* }" |
				awk -v label="$1" '{printf "%s: %d transactions committed, %d WAL bytes\n", label, $1-$2, $3-$4}' >>"$OUT/postgres-usage.txt"
		fi
		PG_MARK=$now
	}
	pg_usage ""
	run_all postgres "$WORKLOADS" "$BIN/peerbench" --broker postgres --url "postgres://bench@127.0.0.1:$PG_PORT/bench?sslmode=disable"
	pg_usage "postgres SKIP LOCKED peer ($WORKLOADS)"
	PG_PID=$BROKER_PID
	if want busbar; then
		# One Busbar node with its store in this PostgreSQL (busbar serve
		# --store): W2 with the raw client. Its broker CPU is Busbar's alone;
		# PostgreSQL's own CPU is not in it.
		log "busbar on the postgres store: starting"
		start_busbar busbar-pg --store "postgres://bench@127.0.0.1:$PG_PORT/bench?sslmode=disable&busbar_table=busbar_kv" \
			--amqp "$BUSBAR_AMQP" --http "$BUSBAR_HTTP"
		BROKER_PID=$BUSBAR_PID CS=$BUSBAR_CS
		pg_usage ""
		run_all busbar-pgstore-raw "$(echo " $WORKLOADS " | grep -o ' w2 ' || true)" "$BIN/busbar" bench --connection-string "$CS" --create --admin "$BUSBAR_HTTP" --broker-label "busbar on postgres" --client raw
		pg_usage "busbar node on postgres (w2, raw client)"
		kill -TERM "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null || true
		BROKER_PID=$PG_PID
	fi
	if want busbar && [[ " $WORKLOADS " == *" w4 "* ]] && [ "$W4_PAIRS" -gt 0 ]; then
		w4_pairs
	fi
	stop_broker # SIGTERM to the postmaster: a smart shutdown once the bench has disconnected
	rm -rf "$P"
	EXTRA_STOP=""
fi

# ------------------------------------------------------------------ report
{
	echo "### Machine"
	echo
	echo "- CPU: $(nproc) × $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "- memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "- kernel: $(uname -r); disk under /tmp: $(df -T /tmp | awk 'NR==2 {print $2" on "$1}')"
	echo "- go: $(go env GOVERSION); busbar: $(git describe --always --dirty 2>/dev/null || echo dev)"
	echo "- rabbitmq-server: $(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || echo none), erlang: $(dpkg-query -W -f '${Version}' erlang-base 2>/dev/null || echo none)"
	echo "- nats-server: $NATS_VERSION (go install); postgresql: $(dpkg-query -W -f '${Version}' postgresql 2>/dev/null || echo none)"
	echo "- run: $(date -u +%Y-%m-%dT%H:%MZ), DURATION=${DURATION}s, KEYS=$KEYS, quick=$QUICK, workloads: $WORKLOADS, busbar clients: $CLIENTS"
	echo "- load while running (1-minute load average at the end): $(cut -d' ' -f1 /proc/loadavg)"
	echo
	NOTE="$(date -u +%Y-%m-%d), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), ${DURATION} s per timed run"
	[ "$QUICK" = 1 ] && NOTE="QUICK SMOKE RUN (${DURATION} s per workload, noisy): not a measurement. $NOTE"
	"$BIN/benchreport" --results "$OUT" --charts "$CHARTS" --note "$NOTE"
} | tee "$OUT/tables.md"
echo >&2
echo "tables: $OUT/tables.md; charts: $CHARTS/throughput.png, $CHARTS/latency.png" >&2
