"""`sidecar dump-mail`: mail archives become a forum dump the importer and the evaluation read."""

from __future__ import annotations

import json
import mailbox
from email.message import EmailMessage
from pathlib import Path

import psycopg
from click.testing import CliRunner

from sidecar.cli.main import main
from sidecar.db.migrate import upgrade
from sidecar.evaluation.dataset import load_dataset
from sidecar.ingest.importer import import_dump
from sidecar.ingest.mail_dump import clean_body, thread_subject


def mail(msg_id: str, subject: str, body: str, *, sender: str = "ann@example.org",
         date: str = "Mon, 05 Aug 2002 10:00:00 +0100", reply_to: str | None = None,
         list_id: str = "Linux users <ilug.linux.ie>") -> EmailMessage:
    message = EmailMessage()
    message["From"] = f"Someone <{sender}>"
    message["Subject"] = subject
    message["Message-ID"] = msg_id
    message["Date"] = date
    message["List-Id"] = list_id
    if reply_to:
        message["In-Reply-To"] = reply_to
    message.set_content(body)
    return message


QUESTION = ("My laptop will not resume from suspend since I moved to kernel 2.4.19, "
            "the screen stays black. Has anyone seen this and is there a fix?")


def archive(tmp_path: Path) -> list[Path]:
    box = mailbox.mbox(tmp_path / "ilug.mbox")
    box.add(mail("<q1@x>", "Suspend broken on 2.4.19", QUESTION))
    box.add(mail("<a1@x>", "Re: Suspend broken on 2.4.19",
                 "On Mon, Ann wrote:\n> the screen stays black\n\nTry acpi=off on the kernel "
                 "command line.\n\n-- \nBob, signing off\n", sender="bob@example.org",
                 date="Mon, 05 Aug 2002 11:00:00 +0100", reply_to="<q1@x>"))
    # No reply header: the thread is found by its subject on the same list.
    box.add(mail("<a2@x>", "RE: [ILUG] Suspend broken on 2.4.19",
                 "Same here; acpi=off fixed it.\n_______________\nIrish Linux Users' Group",
                 sender="cy@example.org", date="Tue, 06 Aug 2002 09:00:00 +0100"))
    box.add(mail("<other@x>", "Cheap flights to Lisbon", "Anyone flown with them?",
                 list_id="Social <social.example.org>"))
    box.flush()
    folder = tmp_path / "single"
    folder.mkdir()
    # A Message-ID the strict header parser rejects.
    (folder / "001.txt").write_bytes(b"From: Di <di@example.org>\nSubject: Printer queue stuck\n"
                                     b"Message-ID: <>\n\nlpq shows jobs forever\n")
    (folder / "002.json").write_text(json.dumps({"not": "mail"}))
    (folder / "003.txt").write_bytes(  # a byte no charset names: kept, replaced
        b"From: Ed <ed@example.org>\nSubject: caf\xe9\nMessage-ID: <c@x>\n\nbad \xff byte\n")
    return [tmp_path / "ilug.mbox", folder]


def test_thread_subject_and_clean_body() -> None:
    assert thread_subject("Re: RE: [ILUG] Fwd: Suspend  broken") == "Suspend broken"
    assert clean_body("On Mon, Ann wrote:\n> quoted\nmine\n\n-- \nsig") == "mine"
    assert clean_body("> only quoted") == ""


def test_mail_archive_becomes_a_forum_the_importer_and_eval_read(
        db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "dump"
    result = CliRunner().invoke(main, ["dump-mail", *map(str, archive(tmp_path)),
                                       "--out", str(out), "--queries", "1"])
    assert result.exit_code == 0, result.output
    counts = json.loads(result.stdout)
    # 6 messages (the .json file is not one): 4 threads, the question held out of its thread.
    assert counts == {"categories": 3, "topics": 4, "posts": 5, "queries": 1, "messages": 6}
    topics = [json.loads(line) for line in (out / "topics.jsonl").open()]
    posts = [json.loads(line) for line in (out / "posts.jsonl").open()]
    suspend = next(t for t in topics if t["title"] == "Suspend broken on 2.4.19")
    replies = [p for p in posts if p["topic_id"] == suspend["id"]]
    assert [p["raw"] for p in replies] == ["Try acpi=off on the kernel command line.",
                                           "Same here; acpi=off fixed it."]
    assert [p["post_number"] for p in replies] == [1, 2]
    assert suspend["posts_count"] == 2
    dataset = load_dataset(out)
    (query,) = dataset.queries
    assert query.text == QUESTION and dict(query.topics) == {suspend["id"]: 2}
    upgrade(db_url)
    with psycopg.connect(db_url) as conn:
        report = import_dump(conn, out, "english").as_dict()
    assert report["posts"]["inserted"] == 5 and report["posts"]["rejected"] == 0
    assert report["topics"]["inserted"] == 4
    assert any("\ufffd" in p["raw"] for p in posts)


def test_nothing_to_read_is_an_empty_dump(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a message at all")
    result = CliRunner().invoke(main, ["dump-mail", str(tmp_path / "notes.txt"),
                                       "--out", str(tmp_path / "dump")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["posts"] == 0
