"""kopf's ``KopfRunner``: run an operator beside a test, as ``kopf run`` would, and read its log.

    from kubeop.kopf.testing import KopfRunner

    def test_operator():
        with KopfRunner(["run", "-A", "--verbose", "example.py"]) as runner:
            ...  # create and delete objects while the operator runs

        assert runner.exit_code == 0
        assert runner.exception is None
        assert "And here we are!" in runner.output

As kopf's: the operator runs in a thread with its own event loop (so mocks and exceptions stay
in the test's process); the ``with`` block's end sets its stop flag and waits up to ``timeout``
seconds for it to finish. ``output`` holds the log lines (the root logger's, at DEBUG with
``--verbose``) and whatever was printed while it ran; ``exit_code`` is 0, 1 after an exception
(``exception``, re-raised at the block's end unless ``reraise=False``) or 2 after a usage
error. ``registry=`` and ``settings=`` are kopf's; the files are loaded into ``registry`` (else
the default registry).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import sys
import threading
import traceback
import types
from collections.abc import Mapping, Sequence
from typing import Literal

from kubeop.kopf.__main__ import load, parse
from kubeop.kopf.registry import Registry, default_registry, set_default_registry
from kubeop.kopf.running import LOG_FORMAT, operator
from kubeop.kopf.settings import OperatorSettings

__all__ = ["KopfRunner"]

ExcInfo = tuple[type[BaseException], BaseException, types.TracebackType | None]


class _Result:
    def __init__(self) -> None:
        self.exit_code = 0
        self.exc_info: ExcInfo | None = None


class KopfRunner(contextlib.AbstractContextManager["KopfRunner"]):
    """Run ``kopf run ...`` arguments in a background thread until the ``with`` block ends."""

    def __init__(
        self,
        args: Sequence[str] | str,
        *,
        reraise: bool = True,
        timeout: float | None = None,
        registry: Registry | None = None,
        settings: OperatorSettings | None = None,
        env: Mapping[str, str | None] | None = None,
        catch_exceptions: bool = True,
    ) -> None:
        self.args = [args] if isinstance(args, str) else list(args)
        self.reraise = reraise
        self.timeout = timeout
        self.registry = registry
        self.settings = settings
        self.env = dict(env or {})
        self.catch_exceptions = catch_exceptions
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._done = threading.Event()
        self._buffer = io.StringIO()
        self._result = _Result()
        self._thread = threading.Thread(target=self._target, name="kopf-runner", daemon=True)

    def __enter__(self) -> KopfRunner:
        self._thread.start()
        self._ready.wait()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: types.TracebackType | None,
    ) -> Literal[False]:
        self._stop.set()
        self._thread.join(timeout=self.timeout)
        if self._thread.is_alive():
            raise Exception("The operator didn't stop, still running.")
        e = self.exception
        if e is not None and self.reraise:
            if exc_val is None:
                raise e
            raise e from exc_val
        return False

    def _target(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._ready.set()
        root = logging.getLogger()
        handler = logging.StreamHandler(self._buffer)
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        level = root.level
        saved_env = {k: os.environ.get(k) for k in self.env}
        saved_registry = default_registry()
        registry = self.registry if self.registry is not None else saved_registry
        out, err = sys.stdout, sys.stderr
        try:
            for k, v in self.env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            sys.stdout = sys.stderr = self._buffer
            root.addHandler(handler)
            args = parse(self.args)
            root.setLevel(
                logging.DEBUG
                if args.verbose or args.debug
                else logging.WARNING
                if args.quiet
                else logging.INFO
            )
            set_default_registry(registry)
            load(args)
            loop.run_until_complete(
                operator(
                    registry=registry,
                    settings=self.settings,
                    stop_flag=self._stop,
                    **args.operator_options(),
                )
            )
        except SystemExit as exc:
            code = exc.code
            self._result.exit_code = code if isinstance(code, int) else 0 if code is None else 1
            if self._result.exit_code:
                self._result.exc_info = (type(exc), exc, exc.__traceback__)
        except BaseException as exc:
            if not self.catch_exceptions:
                raise
            self._result.exit_code = 1
            self._result.exc_info = (type(exc), exc, exc.__traceback__)
            traceback.print_exception(exc, file=self._buffer)
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()
                asyncio.set_event_loop(None)
                root.removeHandler(handler)
                root.setLevel(level)
                sys.stdout, sys.stderr = out, err
                set_default_registry(saved_registry)
                for k, v in saved_env.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                self._done.set()

    def _finished(self) -> _Result:
        if not self._done.is_set():
            raise RuntimeError("the operator is still running: read the results after the with block")
        return self._result

    @property
    def output(self) -> str:
        self._finished()
        return self._buffer.getvalue()

    @property
    def stdout(self) -> str:
        return self.output

    @property
    def stderr(self) -> str:
        return self.output

    @property
    def exit_code(self) -> int:
        return self._finished().exit_code

    @property
    def exception(self) -> BaseException | None:
        info = self._finished().exc_info
        return info[1] if info is not None else None

    @property
    def exc_info(self) -> ExcInfo | None:
        return self._finished().exc_info
