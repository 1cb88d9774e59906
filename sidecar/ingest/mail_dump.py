"""A forum dump from mail archives: a mailing list is a forum whose threads are topics.

Forums are often migrated from mailing lists (Discourse ships an mbox importer), and a public
mail corpus is a forum the sidecar has never seen, of a size and kind the demo forum is not.
This turns mbox files, or folders of one-message files, into the dump format the importer and
``sidecar eval`` / ``sidecar bench`` read (``sidecar.dump_format``):

- one category per mailing list (``List-Id``, else the list's envelope or ``Sender`` address;
  lists with few messages share "other");
- one topic per thread (``In-Reply-To`` / ``References``, else the same subject without its
  ``Re:``/``[list]`` prefixes on the same list), its title the first message's subject;
- one post per message, its text the message's plain body without quoted lines, attribution
  lines, signature or list footer (what a forum post would hold).

Questions for evaluation are known items: a thread whose first message asks something (a "?",
a dozen words) lends that message's body as the question and is its one relevant topic, and
the message itself is deleted from the forum (kept, as a forum keeps a deleted post, and never
searchable), so the question is found only through the replies and the title.
"""

from __future__ import annotations

import email
import email.policy
import hashlib
import mailbox
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.errors import HeaderParseError, MessageError
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.utils import getaddresses, parsedate_to_datetime
from pathlib import Path

SUBJECT_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw|sv)\s*(\[\d+\])?\s*:|\[[^\]]{1,40}\])\s*", re.I)
# "On <date>, <name> wrote:", "Quoting <name> (<address>):": who is quoted, not what is said.
ATTRIBUTION = re.compile(r"^(on\b.*|.*\b(wrote|writes|said|schrieb)|quoting\b.*)\s*:\s*$", re.I)
# Where a list footer or a signature starts: the rest of the message is not the post.
FOOTER = re.compile(r"^(-- ?$|_{10,}|-{10,}|={10,}|Irish Linux Users' Group|http://xent\.com/"
                    r"mailman|To unsubscribe|This sf\.net email is sponsored)", re.I)
MIN_LIST_MESSAGES = 20
MAX_RAW = 20_000
MAX_QUERY_CHARS = 1000
UNDATED = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass
class Mail:
    """One message, reduced to what a forum post keeps."""

    message_id: str
    parents: list[str]
    subject: str
    author: str
    created_at: datetime
    mailing_list: str
    body: str


def thread_subject(subject: str) -> str:
    """The subject without its reply, forward and ``[list]`` prefixes."""
    previous = None
    while previous != subject:
        previous, subject = subject, SUBJECT_PREFIX.sub("", subject)
    return " ".join(subject.split())


def clean_body(text: str) -> str:
    """The author's own words: no quoted lines, attribution, signature or list footer."""
    kept: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if FOOTER.match(line.strip()) and kept:
            break
        if line.lstrip().startswith((">", "|")) or (len(line) < 200 and ATTRIBUTION.match(line)):
            continue
        kept.append(line.rstrip())
    while kept and not kept[-1].strip():
        kept.pop()
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()
    return body[:MAX_RAW]


def _valid(text: str) -> str:
    # Undecodable bytes come back as lone surrogates, which no UTF-8 file can hold.
    return text.encode("utf-8", "replace").decode("utf-8")


def _headers(message: EmailMessage) -> dict[str, str]:
    """Each header's first value, its encoded words decoded, never parsed further: an archive
    holds headers that the strict parser rejects (a Message-ID without its local part)."""
    headers: dict[str, str] = {}
    for name, value in message.raw_items():
        if name.lower() not in headers:
            try:
                text = str(make_header(decode_header(str(value))))
            except (LookupError, ValueError, HeaderParseError):
                text = str(value)
            headers[name.lower()] = " ".join(_valid(text).split())
    return headers


def _list_name(headers: dict[str, str], envelope: str) -> str:
    match = re.search(r"<([^.>]+)", headers.get("list-id", ""))
    if match:
        return match.group(1).lower()
    for address in (envelope, headers.get("sender", ""), headers.get("errors-to", "")):
        found = re.search(r"([\w.+-]+?)(-admin|-request|-bounces|-owner)?@", address)
        if found and found.group(2):
            return found.group(1).lower()
    return "other"


def _plain_text(message: EmailMessage) -> str:
    try:
        part = message.get_body(preferencelist=("plain",))
    except (LookupError, ValueError, IndexError, MessageError):  # a broken MIME structure
        return ""
    if not isinstance(part, EmailMessage):
        return ""
    try:
        return str(part.get_content())
    except (LookupError, ValueError):  # unknown or broken charset
        payload = part.get_payload(decode=True)
        return payload.decode("latin-1") if isinstance(payload, bytes) else ""


def _created(value: str) -> datetime:
    try:
        created = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return UNDATED
    return created.astimezone(UTC) if created.tzinfo else created.replace(tzinfo=UTC)


def parse_message(data: bytes) -> Mail | None:
    """A message of the archive (None: not a message, or no text in it)."""
    envelope = data.split(b"\n", 1)[0].decode("latin-1") if data.startswith(b"From ") else ""
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(message, EmailMessage):
        return None
    headers = _headers(message)
    body = clean_body(_valid(_plain_text(message)))
    if not headers.get("from") or not body:
        return None
    parents = re.findall(r"<[^<>\s]+>", f"{headers.get('references', '')} "
                                        f"{headers.get('in-reply-to', '')}")
    own = re.findall(r"<[^<>\s]+>", headers.get("message-id", ""))
    author = getaddresses([headers["from"]])[0][1].lower() or "unknown"
    return Mail(message_id=own[0] if own else f"<{hashlib.sha1(data).hexdigest()}@archive>",
                parents=parents[::-1], subject=thread_subject(headers.get("subject", "")),
                author=author, created_at=_created(headers.get("date", "")),
                mailing_list=_list_name(headers, envelope), body=body)


def read_archive(paths: Iterable[Path]) -> Iterator[Mail]:
    """Every message of mbox files and of folders of one-message files (others skipped)."""
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            with file.open("rb") as handle:
                head = handle.read(5)
            if head != b"From ":  # one message without an envelope line, or not mail
                mail = parse_message(file.read_bytes())
                if mail:
                    yield mail
                continue
            for entry in mailbox.mbox(file, create=False):
                envelope = f"From {entry.get_from()}\n".encode("latin-1", "replace")
                mail = parse_message(envelope + entry.as_bytes())
                if mail:
                    yield mail
