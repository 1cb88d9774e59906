"""How hard a key is to guess: an estimate in bits, and the rule every key of the sidecar meets.

A right key is compared only while its client is under its own limit of wrong keys
(``sidecar/moderation/throttle.py``), but many clients together can still guess: what makes
guessing hopeless is the key. Length alone is not strength (``"k" * 40`` is 40 characters), so
each character is charged what it adds:

* a character drawn from the classes the key uses (lower case, upper case, digits, other
  printable) costs ``log2`` of their size;
* one that repeats its neighbour or steps from it by one (``aaaa``, ``1234``, ``abcd``) costs
  ``log2(3)``: it is one of three guesses;
* a stretch that repeats an earlier stretch of at least three characters (``passpass``,
  ``abcabcabc``) costs only where and how long it is;
* a common word of keys people pick (``password``, ``secret``, ``admin``...) costs a word of a
  short list.

No dictionary of every word is shipped: the estimate is generous to a passphrase of rare words,
and exact only for keys a machine drew. A generated key passes with a wide margin (``openssl rand
-hex 32``: about 300 bits by this count; ``openssl rand -hex 16``, 128 real bits, about 140);
a key typed by a person rarely does.
"""

from __future__ import annotations

import math
import string

# The shortest key accepted, and the fewest estimated bits: 90 by this count is about 17 random
# letters and digits. A 128-bit key drawn by a machine never scored below 100 (300,000 draws of
# `openssl rand -hex 16`'s shape); what the docs show (`openssl rand -hex 32`) scores about 290.
MIN_KEY_CHARS = 16
MIN_KEY_BITS = 90.0
_CLASSES = (set(string.ascii_lowercase), set(string.ascii_uppercase), set(string.digits))
_OTHER = 33  # printable ASCII that is not a letter or a digit
_READ = 256  # characters read: far past any threshold, and the search below stays cheap
_STEP = math.log2(3)  # same as the last character, one more, or one less
_WORD = 10.0  # one word of a list of about a thousand
# Words people put in keys (checked in lower case); found anywhere in the key.
_WORDS = ("password", "passwd", "secret", "admin", "moderator", "moderation", "sidecar",
          "forum", "discourse", "changeme", "letmein", "qwerty", "azerty", "welcome",
          "default", "example", "master", "token", "apikey", "test", "demo", "key", "login",
          "root", "user", "pass", "hello", "dragon", "monkey", "iloveyou", "super", "private",
          "access", "staff", "server", "summer", "winter", "abc", "xyz")


def key_bits(key: str) -> float:
    """Estimated bits of a key (see the module's docstring); 0 for an empty key."""
    text = key.strip()[:_READ]
    if not text:
        return 0.0
    pool = sum(len(c) for c in _CLASSES if any(ch in c for ch in text))
    pool += _OTHER if any(not any(ch in c for c in _CLASSES) for ch in text) else 0
    per_char = math.log2(max(pool, 2))
    lower = text.lower()
    bits = 0.0
    i = 0
    while i < len(text):
        word = next((w for w in _WORDS if lower.startswith(w, i)), "")
        copy = _longest_copy(text, i)
        if len(word) >= max(copy, 3):
            bits += _WORD
            i += len(word)
        elif copy >= 3:
            bits += math.log2(i) + math.log2(copy)
            i += copy
        elif i and abs(ord(text[i]) - ord(text[i - 1])) <= 1:
            bits += _STEP
            i += 1
        else:
            bits += per_char
            i += 1
    return bits


def _longest_copy(text: str, i: int) -> int:
    """The longest stretch at ``i`` that starts earlier in ``text`` too (it may overlap ``i``)."""
    best = 0
    for start in range(i):
        n = 0
        while i + n < len(text) and text[start + n] == text[i + n]:
            n += 1
        best = max(best, n)
    return best


def key_problem(key: str) -> str | None:
    """Why ``key`` is too weak to guard the sidecar, or None when it is strong enough."""
    text = key.strip()
    if len(text) < MIN_KEY_CHARS:
        return (f"a key needs at least {MIN_KEY_CHARS} characters (a long random string: "
                "`openssl rand -hex 32`)")
    bits = key_bits(text)
    if bits < MIN_KEY_BITS:
        return (f"the key is too easy to guess (about {bits:.0f} bits by the sidecar's estimate, "
                f"at least {MIN_KEY_BITS:.0f} needed: repeats, runs such as 1234 and common "
                "words count for little); generate one: `openssl rand -hex 32`")
    return None
