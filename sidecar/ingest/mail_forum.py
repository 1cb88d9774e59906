"""Mail archive messages (:mod:`sidecar.ingest.mail_dump`) grouped into a forum and written as
a dump."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.dump_format import slugify
from sidecar.ingest.mail_dump import MAX_QUERY_CHARS, MIN_LIST_MESSAGES, Mail

MIN_QUESTION_WORDS = 12
MIN_THREAD_SUBJECT = 4  # shorter subjects ("hi", "?") do not join threads by themselves


@dataclass(frozen=True)
class MailForum:
    """What :func:`write_dump` wrote."""

    categories: int
    topics: int
    posts: int
    queries: int
    messages: int

    def as_dict(self) -> dict[str, int]:
        """The counts, for the command's JSON answer."""
        return dict(vars(self))


def threads(mails: Iterable[Mail]) -> list[list[Mail]]:
    """Messages grouped into threads (replies by their headers, else by subject on the same
    list), each in date order; threads in order of their first message. A message id seen twice
    (the same message archived twice) is kept once."""
    by_id: dict[str, Mail] = {}
    for mail in mails:
        by_id.setdefault(mail.message_id, mail)
    root: dict[str, str] = {key: key for key in by_id}

    def find(key: str) -> str:
        while root[key] != key:
            root[key] = root[root[key]]
            key = root[key]
        return key

    def join(a: str, b: str) -> None:
        root[find(a)] = find(b)

    first_of_subject: dict[tuple[str, str], str] = {}
    for key, mail in sorted(by_id.items(), key=lambda kv: kv[1].created_at):
        parent = next((p for p in mail.parents if p in by_id), None)
        if parent is not None:
            join(key, parent)
        if len(mail.subject) >= MIN_THREAD_SUBJECT:
            subject = (mail.mailing_list, mail.subject.lower())
            join(key, first_of_subject.setdefault(subject, key))
    groups: dict[str, list[Mail]] = defaultdict(list)
    for key, mail in by_id.items():
        groups[find(key)].append(mail)
    ordered = [sorted(g, key=lambda m: m.created_at) for g in groups.values()]
    return sorted(ordered, key=lambda g: (g[0].created_at, g[0].message_id))


def asks(mail: Mail) -> bool:
    """Whether a thread's first message is a question worth evaluating with (its own question:
    not a reply to a message the archive does not hold)."""
    return not mail.parents and "?" in mail.body and len(mail.body.split()) >= MIN_QUESTION_WORDS


def write_dump(mails: Iterable[Mail], out: Path, queries: int = 100, seed: int = 0
               ) -> MailForum:
    """Write categories/topics/posts JSONL, and ``queries`` known-item questions
    (queries.jsonl, qrels_topic.tsv; their first messages left out of the forum), to ``out``."""
    groups = threads(mails)
    sizes = Counter(g[0].mailing_list for g in groups for _ in g)
    # A list of its own when it holds enough messages (a hundredth of a small archive's).
    least = min(MIN_LIST_MESSAGES, max(1, sum(sizes.values()) // 100))
    lists = sorted(name for name, n in sizes.items() if n >= least and name != "other")
    category = {name: i for i, name in enumerate([*lists, "other"], start=1)}
    askers = [i for i, g in enumerate(groups) if len(g) >= 2 and asks(g[0])]
    held = set(random.Random(seed).sample(askers, min(queries, len(askers))))
    users: dict[str, tuple[int, str]] = {}
    taken: set[str] = set()  # usernames given
    rows: dict[str, list[dict[str, Any]]] = {"topics": [], "posts": [], "queries": []}
    post_id = 0
    for topic_id, group in enumerate(groups, start=1):
        first = group[0]
        if topic_id - 1 in held:
            rows["queries"].append({"id": f"mail-{topic_id}", "text": first.body[:MAX_QUERY_CHARS],
                                    "subject": first.subject, "body": first.body,
                                    "topic_id": topic_id})
            group = group[1:]
        numbers = {m.message_id: n for n, m in enumerate(group, start=1)}
        for number, mail in enumerate(group, start=1):
            post_id += 1
            if mail.author not in users:
                name = _username(mail.author, taken)
                taken.add(name)
                users[mail.author] = (len(users) + 1, name)
            user = users[mail.author]
            parent = next((numbers[p] for p in mail.parents if p in numbers), None)
            rows["posts"].append({
                "id": post_id, "topic_id": topic_id, "post_number": number, "user_id": user[0],
                "username": user[1], "created_at": mail.created_at.isoformat(), "raw": mail.body,
                "reply_to_post_number": parent if parent and parent < number else None,
                "external_id": mail.message_id[:255]})
        rows["topics"].append({
            "id": topic_id, "title": (first.subject or "(no subject)")[:255],
            "slug": slugify(first.subject), "archetype": "regular",
            "category_id": category.get(first.mailing_list, category["other"]),
            "created_at": first.created_at.isoformat(), "posts_count": len(group)})
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "categories.jsonl", [
        {"id": i, "name": name[:50], "slug": slugify(name), "read_restricted": False,
         "description": f"The {name} mailing list." if name != "other" else "Other lists."}
        for name, i in category.items()])
    _write(out / "topics.jsonl", rows["topics"])
    _write(out / "posts.jsonl", rows["posts"])
    _write(out / "queries.jsonl", [{k: v for k, v in q.items() if k != "topic_id"}
                                   for q in rows["queries"]])
    (out / "qrels_topic.tsv").write_text("query_id\ttopic_id\tgrade\n" + "".join(
        f"{q['id']}\t{q['topic_id']}\t2\n" for q in rows["queries"]), encoding="utf-8")
    return MailForum(categories=len(category), topics=len(groups), posts=post_id,
                     queries=len(rows["queries"]), messages=sum(len(g) for g in groups))


def _username(address: str, taken: set[str]) -> str:
    base = slugify(address.split("@")[0]).replace("-", "_")[:40] or "user"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}{n}"
    return name


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
