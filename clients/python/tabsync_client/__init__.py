"""tabsync's Python client: a session with the outbox, retry and resume rules of the Swift and JS
clients (`Session`), the confirmed workspace it keeps (`Replica`), the HTTP reads and writes
(`Http`), the change feed (`Feed`) and a webhook signature verifier (`WebhookVerifier`)."""
from .feed import Feed, FeedBroken, FeedEvent, FeedUnreachable
from .http import Http, HttpError, KeyReused
from .replica import Diverged, Replica
from .session import SUBPROTOCOL, TRANSIENT, AnswerGone, Backoff, Ended, Refused, Session
from .webhooks import WebhookInvalid, WebhookVerifier

__all__ = ["AnswerGone", "Backoff", "Diverged", "Ended", "Feed", "FeedBroken", "FeedEvent", "FeedUnreachable", "Http",
           "HttpError", "KeyReused", "Refused", "Replica", "Session", "SUBPROTOCOL", "TRANSIENT", "WebhookInvalid",
           "WebhookVerifier"]
