"""What the SDK-backed adapters share: client handling, secrets, the retrier, ``repr``.

A client the adapter builds belongs to the asyncio event loop of the call that built it: its
pooled connections can be used, and closed, only there. So the adapter keeps one client per
loop, closed when that loop shuts down (``asyncio.run`` / ``anyio.run`` finalise the loop's
async generators, and one of ours, started with the client, closes it): an agent used by two
``asyncio.run`` calls in turn, or by two threads each running its own loop, works in all of
them, and a script that never closes its models leaves nothing open at exit.
:meth:`SdkModel.aclose` closes the running loop's client earlier.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncGenerator
from typing import Any, TypeVar

from .._loops import PerLoop, closed_with_loop, running_loop
from ..errors import ModelError, UsageError
from ..policies import RetryPolicy
from ..settings import check_real_call_allowed
from ._errors import map_sdk_error
from ._retry import Retrier, Sleep
from ._wire import import_sdk, secret_repr
from .prices import Price

__all__ = ["SdkModel"]


_M = TypeVar("_M", bound="SdkModel")


class SdkModel:
    """Base of :class:`OpenAIModel` and :class:`AnthropicModel`.

    Subclasses set :attr:`sdk_module` / :attr:`extra` (for the install hint) and
    :attr:`key_env` (the API-key variable), and implement :meth:`_build_client`.
    """

    sdk_module = ""
    extra = ""
    key_env = ""

    def __init__(
        self,
        model: str,
        *,
        provider: str,
        client: Any | None,
        api_key: str | None,
        base_url: str | None,
        timeout_s: float,
        retry: RetryPolicy,
        price: Price | None,
        sleep: Sleep | None,
        rng: random.Random | None,
    ) -> None:
        if not model:
            raise UsageError(f"{type(self).__name__} needs a model id, e.g. {type(self).__name__}('<model>')")
        if client is None:
            import_sdk(self.sdk_module, self.extra)  # fail at construction with the install hint
        self.model = model
        self.provider = provider
        self._name = f"{provider}:{model}"
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._price = price
        self._given: Any | None = None if client is None else client.with_options(max_retries=0)
        self._owns_client = client is None  # built here, on the first call: closed by :meth:`aclose`
        # the clients built here, one per event loop, each with the generator that closes it with its loop
        self._built: PerLoop[tuple[Any, AsyncGenerator[None, None] | None]] = PerLoop(self._build_for_loop)
        self._client: Any | None = self._given  # the client of the latest call (its base URL, its key)
        self._retrier = Retrier(retry, model_name=self._name, map_error=self._map_error, sleep=sleep, rng=rng)

    @property
    def name(self) -> str:
        """``"<provider>:<model>"``, e.g. ``"openai:gpt-4.1-mini"``."""
        return self._name

    def _repr(self, **fields: Any) -> str:
        base_url = self._base_url
        if self._client is not None:
            base_url = str(getattr(self._client, "base_url", "")) or None
        return secret_repr(type(self).__name__, model=self.model, **fields, base_url=base_url)

    def __repr__(self) -> str:
        return self._repr()

    def _build_client(self, sdk: Any) -> Any:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the HTTP client this model built, and its pooled connections (a no-op otherwise).

        That is the client of the running event loop (one built on a loop that has ended was
        closed by its shutdown; one another thread's loop still uses is closed by that loop's
        shutdown). A client given as ``client=`` is the caller's to close. A later call builds
        a new client. ``async with model:`` closes it on the way out.
        """
        if not self._owns_client:
            return
        self._client = None
        for client, keeper in self._built.take_closable():
            if keeper is not None:
                await keeper.aclose()  # closes the client (a no-op if its loop's shutdown did)
            else:
                await client.close()

    async def __aenter__(self: _M) -> _M:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _get_client(self) -> Any:
        if self._given is not None:
            self._client = self._given
            return self._given
        client = self._built.get()[0]
        self._client = client
        return client

    def _build_for_loop(self) -> tuple[Any, AsyncGenerator[None, None] | None]:
        """A client for the running loop, with the generator that closes it when that loop shuts down."""
        client = self._build_client(import_sdk(self.sdk_module, self.extra))
        return client, (closed_with_loop(client.close) if running_loop() is not None else None)

    def _client_for_call(self) -> Any:
        client = self._get_client()
        check_real_call_allowed(self.provider, str(getattr(client, "base_url", "") or "") or None)
        return client

    def _secrets(self) -> tuple[str, ...]:
        keys = [self._api_key, os.environ.get(self.key_env)]
        client_key = getattr(self._client, "api_key", None)
        if isinstance(client_key, str):
            keys.append(client_key)
        return tuple(k for k in keys if k)

    def _map_error(self, exc: BaseException) -> ModelError | None:
        return map_sdk_error(exc, provider=self.provider, secrets=self._secrets())
