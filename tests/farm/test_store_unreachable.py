"""An object store whose server does not answer (issue 44): an S3 endpoint that refuses and
one whose host name does not resolve get the same line and exit code, and the line is true.
They exited 1 and 2, and the first said "the runs stored so far are kept" for a folder that
never existed."""

from __future__ import annotations

import pytest

from optfarm.farm.cli import main

from .conftest import free_port
from .test_cli_edges import one_line_error

ENDPOINTS = {
    "refused": lambda: f"127.0.0.1:{free_port()}",  # nothing listens there
    "unknown host": lambda: "nohost.invalid:9000",  # .invalid never resolves (RFC 2606)
}


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_an_s3_store_that_does_not_answer_is_one_line_exit_1_nothing_run(
    endpoint, tmp_path, monkeypatch, capsys
):
    for k, v in {
        "AWS_ACCESS_KEY_ID": "optfarm-test",
        "AWS_SECRET_ACCESS_KEY": "optfarm-test",
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    out = f"s3://bucket/sweep?endpoint_override={ENDPOINTS[endpoint]()}&scheme=http"
    argv = ["sweep", "--datasets", "synthetic", "--optimizers", "random", "--iterations", "2"]
    assert main([*argv, "--serial", "--no-progress", "--out", out]) == 1
    err = one_line_error(capsys, "farm: error: cannot reach s3://bucket/sweep: ")
    assert err.endswith("; nothing was run, run the sweep again when fixed")
    assert list(tmp_path.iterdir()) == []  # nothing written here either
