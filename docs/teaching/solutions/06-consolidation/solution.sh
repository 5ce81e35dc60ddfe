#!/bin/sh
# Exercise 6: the runs behind results/. broken/ lacks the pOfan run: the checker must fail
# `runs-present`.
set -eu
ofan-lab compare --name "${LAB:-lab}" --lb rr,ofan,pofan --sizes 256KB --repeat 1 --seed 6 --out "${OUT:-ex6}"
