"""cgq.result() on a full disk (issue 31): the write fails with an OSError
that says result.json could not be written, and no half-written file is left
(root only: a 64 KiB tmpfs is mounted as the trial directory)."""

import os
import subprocess

import pytest

import cgq


def test_result_on_full_disk_raises_and_leaves_nothing(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    d = tmp_path / "trial"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "none", str(d)],
                       capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs: %s" % r.stderr.strip())
    try:
        with open(d / "fill.bin", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        monkeypatch.setenv("CGQ_TRIAL_DIR", str(d))
        with pytest.raises(OSError, match="cgq: result.json could not be written: "
                                          "No space left on device"):
            cgq.result(score=0.5)
        assert sorted(os.listdir(d)) == ["fill.bin"]
        # Space back: the same call works.
        os.unlink(d / "fill.bin")
        assert cgq.result(score=0.5) == str(d / "result.json")
        assert (d / "result.json").read_text().strip() == '{"score":0.5}'
    finally:
        if subprocess.run(["umount", str(d)], timeout=20).returncode != 0:
            subprocess.run(["umount", "-l", str(d)], timeout=20)
