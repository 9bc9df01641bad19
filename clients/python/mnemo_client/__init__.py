"""mnemo-client: Python client for Mnemo, the agent-memory service.

    from mnemo_client import Mnemo

    with Mnemo("http://127.0.0.1:8000", api_key="mnemo_...") as mnemo:
        mnemo.remember(person="ada", key="home-city", description="Where Ada lives", content="Ada lives in Oslo.")
        hits = mnemo.recall_memories(person="ada", query="where does Ada live?")["results"]

AsyncMnemo has the same methods, awaited. Errors are MnemoError subclasses (mnemo_client.errors);
results are typed dicts (mnemo_client.types). mnemo_client.langgraph has a LangGraph store;
verify_signature checks a webhook delivery's signature.
"""

from mnemo_client._async import AsyncMnemo
from mnemo_client._core import TOOL_NAMES, Call, RetryPolicy
from mnemo_client._sync import Mnemo
from mnemo_client.errors import (
    AuthenticationError,
    BankFull,
    Conflict,
    ConnectionFailed,
    Invalid,
    MnemoError,
    NotFound,
    PermissionDenied,
    RateLimited,
    Refused,
    ServerError,
    TooLarge,
    TooLong,
    Unavailable,
    Unprocessable,
)
from mnemo_client.webhooks import verify_signature

__version__ = "0.1.0"

__all__ = [
    "TOOL_NAMES",
    "AsyncMnemo",
    "AuthenticationError",
    "BankFull",
    "Call",
    "Conflict",
    "ConnectionFailed",
    "Invalid",
    "Mnemo",
    "MnemoError",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "Refused",
    "RetryPolicy",
    "ServerError",
    "TooLarge",
    "TooLong",
    "Unavailable",
    "Unprocessable",
    "verify_signature",
]
