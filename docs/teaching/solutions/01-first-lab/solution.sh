#!/bin/sh
# Exercise 1, correct: a k = 4 fat tree with every switch running.
set -eu
LAB=${LAB:-lab}
ofan-lab up --name "$LAB"
