#!/usr/bin/python3
"""Draws the default model's training curve from `fucina finetune`'s log with gnuplot.

usage: loss_curve.py TRAIN.LOG OUT.png
The log's step lines ("step S/N  loss L  lr R  T tok/s ... [val loss V]") give the training loss per step
(a 50-step moving average is drawn over the raw points) and the validation loss where it was
computed. A resumed run's log is appended to the same file: later lines for a step win.
"""
import re
import subprocess
import sys
import tempfile

log, out = sys.argv[1], sys.argv[2]
train, val, seconds = {}, {}, {}
for line in open(log, encoding="utf-8", errors="replace"):
    for part in line.split("\r"):
        m = re.search(r"step (\d+)/\d+\s+loss ([0-9.]+)", part)
        if not m:
            continue
        s = int(m.group(1))
        train[s] = float(m.group(2))
        r = re.search(r"([0-9.]+) tok/s", part)
        if r and float(r.group(1)) > 0:
            seconds[s] = 16 * 256 / float(r.group(1))  # the step's time (windows of 256, 16 per step)
        v = re.search(r"val loss ([0-9.]+)", part)
        if v:
            val[s] = float(v.group(1))
if not train:
    sys.exit("loss_curve.py: no step lines in " + log)
steps = sorted(train)
with tempfile.NamedTemporaryFile("w", suffix=".dat", delete=False) as t, \
        tempfile.NamedTemporaryFile("w", suffix=".val", delete=False) as tv:
    window = []
    for s in steps:
        window = (window + [train[s]])[-50:]
        t.write(f"{s} {train[s]} {sum(window) / len(window)}\n")
    for s in sorted(val):
        tv.write(f"{s} {val[s]}\n")
script = f"""
set terminal pngcairo size 900,500 font ",11" noenhanced
set output "{out}"
set title "fucina-default: training and validation loss (nats per token)"
set xlabel "optimizer step (16 x 256 tokens)"
set ylabel "cross-entropy"
set grid
plot "{t.name}" using 1:2 with points pt 7 ps 0.2 lc rgb "#bbbbbb" title "train (per step)", \\
     "{t.name}" using 1:3 with lines lw 2 lc rgb "#1f77b4" title "train (50-step mean)", \\
     "{tv.name}" using 1:2 with linespoints lw 2 pt 7 lc rgb "#d62728" title "validation"
"""
subprocess.run(["gnuplot"], input=script, text=True, check=True)
print(f"wrote {out}: {len(steps)} steps, {len(val)} validation points; at most {16 * 256 * len(steps)} tokens seen "
      f"in {sum(seconds.values()) / 60:.0f} min of training steps (validation and checkpoints not counted)")
