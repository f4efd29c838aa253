"""cgq.progress: Job.wait()'s progress line, as `cgq run` draws it
(cli/progress.c): one line redrawn in place on a terminal or in a notebook,
else a plain line whenever it changes, at most every 2 s. Standard library only.
"""

import sys
import time


def clock(s):
    """s seconds as "0:12", "12:34" or "1:02:03"."""
    t = int(max(0, s))
    if t >= 3600:
        return "%d:%02d:%02d" % (t // 3600, t // 60 % 60, t % 60)
    return "%d:%02d" % (t // 60, t % 60)


def line(status, elapsed, width=0):
    """The line, at most width characters (0: no bound; the least useful
    parts go first): "job 7  [#####.....]  12/24  running 2  failed 0  best
    score=0.93 (trial 7)  0:12  ETA 0:30"."""
    c = status["counts"]
    done, total = status["done"], status["total"]
    parts = []  # (text, priority: the lowest goes first when it does not fit)
    if total:
        filled = min(10, int(10 * done / total)) if total else 0
        parts.append(("[" + "#" * filled + "." * (10 - filled) + "]", 1))
    parts.append(("%d/%s" % (done, total if total else "?"), 9))
    parts.append(("running %d" % c["running"], 8))
    parts.append(("failed %d" % c["failed"], 8))
    for state in ("stopped", "cancelled", "stale", "unschedulable"):
        if c[state]:
            parts.append(("%s %d" % (state, c[state]), 7))
    best = status["best"]
    if best is not None:
        metric = status["objective"]["metric"] if status["objective"] else "best"
        parts.append(("best %s=%.6g (trial %d)" % (metric[:80], best["value"], best["trial"]), 4))
    parts.append((clock(elapsed), 3))
    if total and done and status["state"] == "running" and done < total:
        parts.append(("ETA " + clock(elapsed * (total - done) / done), 2))
    head = "job %d" % status["id"]
    shown = list(parts)
    while width and shown and len(head) + sum(len(t) + 2 for t, _ in shown) > width:
        shown.remove(min(shown, key=lambda p: p[1]))
    return "  ".join([head] + [t for t, _ in shown])


class Progress:
    """Draws status lines on stream (default stderr)."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        tty = bool(isatty and isatty())
        # A notebook's output area honours a carriage return too.
        self.inplace = tty or "ipykernel" in sys.modules
        self.width = 0
        if tty:
            try:
                import shutil
                self.width = max(20, shutil.get_terminal_size().columns - 1)
            except (OSError, ValueError):
                self.width = 79
        self.last = None
        self.last_at = 0.0
        self.open = False

    def show(self, status, elapsed, final=False):
        text = line(status, elapsed, self.width)
        try:
            if self.inplace:
                if text != self.last or final:
                    self.stream.write("\r" + text + ("\033[K" if self.width else ""))
                    self.open = True
            else:
                # what changed, not the clock
                key = (status["state"], tuple(status["counts"].values()), str(status["best"]))
                now = time.monotonic()
                if final or (key != self.last and now - self.last_at >= 2.0):
                    self.stream.write(text + "\n")
                    self.last, self.last_at = key, now
                return self.stream.flush()
            self.last = text
            if final:
                self.stream.write("\n")
                self.open = False
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed stream does not stop the wait

    def close(self):
        if self.open:
            try:
                self.stream.write("\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self.open = False
