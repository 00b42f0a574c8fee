#!/usr/bin/env bash
# A producer in shell (redis-cli): publishes N jobs of a Django task through the wire
# protocol (docs/protocol.md) and prints each job's id, one a line.
#
#   publish.sh REDIS_URL PREFIX QUEUE TASK N
#
# Job i (from 1) calls TASK(i, 1000 * i), with the id cli-<i>.
set -euo pipefail
[ $# -eq 5 ] || { echo "usage: publish.sh REDIS_URL PREFIX QUEUE TASK N" >&2; exit 2; }
url=$1 prefix=$2 queue=$3 task=$4 n=$5
tag="{$prefix:$queue}"
keys=()
for name in ready delayed body meta ctr notify stats dead leased wait expiry expired gjobs proto; do
  keys+=("$tag:$name")
done
for i in $(seq 1 "$n"); do
  body="{\"task\": \"$task\", \"args\": [$i, $((1000 * i))], \"kwargs\": {}}"
  # --raw: a line per element of the reply; -e: an error reply exits non-zero
  reply=$(redis-cli -u "$url" -e --raw FCALL zq1_publish 14 "${keys[@]}" 1 "$body" "{\"id\": \"cli-$i\"}")
  status=$(printf '%s\n' "$reply" | sed -n 1p)
  id=$(printf '%s\n' "$reply" | sed -n 2p)
  [ "$status" = ok ] || { echo "job $i: $reply" >&2; exit 1; }
  echo "$id"
done
