"""tabsync's Python client: a session with the outbox, retry and resume rules of the Swift and JS
clients (`Session`), the confirmed workspace it keeps (`Replica`), and the HTTP reads (`Http`)."""
from .http import Http, HttpError
from .replica import Diverged, Replica
from .session import SUBPROTOCOL, TRANSIENT, AnswerGone, Backoff, Ended, Refused, Session

__all__ = ["AnswerGone", "Backoff", "Diverged", "Ended", "Http", "HttpError", "Refused", "Replica", "Session",
           "SUBPROTOCOL", "TRANSIENT"]
