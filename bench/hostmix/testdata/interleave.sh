#!/bin/bash
# Runs test binaries of bench/hostmix in turn, one run each per round, so that
# a shared machine's load falls on all of them alike; renames each binary's
# kvbreaker-mirror to its label and gobreaker-slice to gobreaker-slice@label.
#
#   interleave.sh ROUNDS OUT BINARY LABEL [BINARY LABEL ...]
rounds=$1; out=$2; shift 2
args=("$@")
pat='HostMix/n=10000$/state=(closed|open)/mode=serial/impl=(kvbreaker-mirror|gobreaker-slice)$'
: > "$out"
for _ in $(seq "$rounds"); do
  for ((i = 0; i < ${#args[@]}; i += 2)); do
    "${args[i]}" -test.run '^$' -test.bench "$pat" -test.benchmem -test.benchtime 200ms -test.count 1 |
      grep ns/op | sed "s/impl=kvbreaker-mirror/impl=${args[i+1]}/; s/impl=gobreaker-slice/impl=gobreaker-slice@${args[i+1]}/" >> "$out"
  done
done
