#!/bin/sh
# Exercise 4, correct: the link taken down through the lab, which recomputes the static routes.
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB"
ofan-lab link e-p0-0 a-p0-0 down --name "$LAB"
