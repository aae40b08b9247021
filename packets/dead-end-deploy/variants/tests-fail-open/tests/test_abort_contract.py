import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_runner_does_not_deploy():
    env = dict(os.environ, MODEL_BASE_URL="http://127.0.0.1:9/v1")
    proc = subprocess.run([sys.executable, "tools/abort_runner.py"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=15)
    assert "DEPLOY_OK" not in proc.stdout
    assert "ABORT" in proc.stdout
