"""The pyreduce logger and notice(): quiet by default, one line per key."""

import logging
import uuid

import numpy as np

import pyreduce
from pyreduce import log


def test_the_logger_is_quiet_until_configured():
    logger = logging.getLogger("pyreduce")
    assert logger is log.logger
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)
    assert logger.level == logging.NOTSET  # the application decides


def test_notice_prints_once_per_key(capsys, monkeypatch, caplog):
    monkeypatch.delenv("PYREDUCE_QUIET", raising=False)
    key = uuid.uuid4().hex
    with caplog.at_level(logging.INFO, logger="pyreduce"):
        assert log.notice("compiling a kernel, about a second", key=key)
        assert not log.notice("compiling another kernel", key=key)
    assert capsys.readouterr().err == "pyreduce: compiling a kernel, about a second\n"
    assert [r.getMessage() for r in caplog.records] == [
        "compiling a kernel, about a second", "compiling another kernel"]


def test_pyreduce_quiet_silences_stderr(capsys, monkeypatch):
    monkeypatch.setenv("PYREDUCE_QUIET", "1")
    assert not log.notice(f"not shown {uuid.uuid4().hex}")
    assert capsys.readouterr().err == ""


def test_plans_and_cache_are_logged_at_debug(caplog):
    x = np.arange(1000, dtype=np.float32)
    salt = uuid.uuid4().int % 1000  # a new closure value: a new op, a new kernel

    def op():
        return lambda a, b: a + b + np.float32(salt * 0)

    with caplog.at_level(logging.DEBUG, logger="pyreduce"):
        gpu = "cuda" if "cuda" in pyreduce.available() else "sim"
        pyreduce.reduce(x, op(), backend=gpu)
        pyreduce.reduce(x[:999], op(), backend=gpu)  # a new plan, the same kernel
    text = [r.getMessage() for r in caplog.records if r.name == "pyreduce"]
    assert any(m.startswith("plan for 1000 elements") for m in text)
    assert any(m.startswith("kernel cache miss") for m in text)
    assert any(m.startswith("kernel cache hit") for m in text)
    assert any(m.startswith("plan for 999 elements") for m in text)
