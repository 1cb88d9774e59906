/*
 * Forum answers for a stock Discourse: a discourse-ai custom tool for an agent that members
 * mention in a topic or a PM (docs/discourse.md). It asks the forum sidecar and posts its answer
 * as the agent's reply, word for word (chain.setCustomRaw: the agent's LLM cannot rewrite it).
 *
 * Parameter: question (string, required): the member's question, in their words.
 * Secrets (AI credentials bound to these aliases in the tool's editor):
 *   sidecar_url           the sidecar's address as Discourse reaches it (https://..., or http://
 *                         on port 80 only: Discourse speaks TLS to every other port)
 *   sidecar_api_key       SIDECAR_API_KEY
 *   sidecar_asker_secret  any long random string: the member is sent as HMAC(secret, user id)
 *
 * What the sidecar receives: the question and, in a public topic, a few earlier posts of it, with
 * usernames and quote attributions taken out; never the member's name, id or email. In a private
 * message only the question is sent: the other participants' posts never leave the forum.
 */

// --- settings ---------------------------------------------------------------------------------
// "sidecar": the sidecar's own LLM writes the answer (POST /v1/answer).
// "forum":   this agent's LLM writes it: POST /v1/retrieve, llm.generate with the sidecar's
//            prompt, POST /v1/sanitize; when the sidecar abstains the LLM is not called.
var MODE = "sidecar";
var EARLIER_POSTS = 4; // earlier posts of a public topic sent with the question (0: none)
var POST_CHARS = 1500; // each earlier post cut to this many characters
var QUESTION_CHARS = 4000;
var EVIDENCE = 6; // posts the answer may cite (1..12)
var LOCALE = null; // the members' language (e.g. "fr"); null: the sidecar's default
var SORRY = "Sorry, I can't search the forum right now. Please try again in a little while.";
var BUSY = "Many questions are being asked right now. Please try again in a minute.";
// -----------------------------------------------------------------------------------------------

var done = { step: "not run" };

function invoke(params) {
  var question = String((params && params.question) || "").trim();
  if (!question) return { error: "the question parameter is required" };
  try {
    done = MODE === "forum" ? withForumLlm(question) : withSidecarLlm(question);
  } catch (e) {
    // Any failure (sidecar down, a timeout, a refused address): one polite line, no details.
    done = { step: "error", raw: SORRY };
  }
  chain.setCustomRaw(done.raw);
  return { posted: true, outcome: done.outcome || done.step, zone: done.zone || null };
}

function details() {
  if (done.step === "error") return "The forum search was not reachable.";
  if (done.step === "not run") return "";
  var parts = ["Searched the forum"];
  if (done.evidence !== undefined) parts.push(done.evidence + " posts found");
  if (done.zone) parts.push("zone: " + done.zone);
  return parts.join(", ");
}

// --- the two modes ----------------------------------------------------------------------------

function withSidecarLlm(question) {
  var answer = call("/v1/answer", request(question));
  if (answer.failed) return answer.failed;
  var body = answer.body;
  return {
    step: "answer", raw: body.answer.markdown, outcome: body.outcome, zone: body.zone,
    evidence: (body.evidence || []).length,
  };
}

function withForumLlm(question) {
  var found = call("/v1/retrieve", request(question));
  if (found.failed) return found.failed;
  var retrieval = found.body;
  var evidence = (retrieval.evidence || []).length;
  if (retrieval.zone === "abstain" || !retrieval.prompt) {
    // The sidecar's fixed text; the forum's LLM is not asked at all.
    return { step: "retrieve", raw: retrieval.abstain_text || SORRY, outcome: "abstained",
             zone: retrieval.zone, evidence: evidence };
  }
  var reply = llm.generate({ messages: retrieval.prompt.messages.map(asDiscourseMessage) });
  reply = String(reply || "").trim() || retrieval.prompt.refusal || "NO_ANSWER";
  var cleaned = call("/v1/sanitize", { retrieval_id: retrieval.retrieval_id, text: reply });
  if (cleaned.failed) return cleaned.failed;
  return { step: "sanitize", raw: cleaned.body.text, outcome: cleaned.body.outcome,
           zone: retrieval.zone, evidence: evidence };
}

// The sidecar's roles as discourse-ai's prompt types (its Prompt knows no "assistant").
function asDiscourseMessage(message) {
  var type = { system: "system", user: "user", assistant: "model" }[message.role] || "user";
  return { type: type, content: String(message.content) };
}

// --- the request ------------------------------------------------------------------------------

function request(question) {
  var body = {
    messages: conversation(question),
    limit: EVIDENCE,
    // Who asks, never named: an HMAC of the member's id with a secret the sidecar never sees.
    asker: crypto.hmacSha256(secrets.get("sidecar_asker_secret"), String(context.user_id)),
  };
  if (LOCALE) body.locale = LOCALE;
  return body;
}

function call(path, body) {
  var base = String(secrets.get("sidecar_url")).replace(/\/+$/, "");
  var response = http.post(base + path, {
    headers: {
      Authorization: "Bearer " + secrets.get("sidecar_api_key"),
      "Content-Type": "application/json",
    },
    body: body,
  });
  if (response.status === 429) return { failed: { step: "busy", raw: BUSY } };
  if (response.status !== 200) return { failed: { step: "error", raw: SORRY } };
  return { body: JSON.parse(response.body) };
}

// --- the conversation -------------------------------------------------------------------------

// The member's question last; before it, in a public topic only, the opening post and the few
// posts just before the mention, as the member may see them.
function conversation(question) {
  var names = knownNames();
  var mention = null; // the member's post that mentioned the agent, read as the member
  if (context.post_id && context.user_id > 0) {
    mention = discourse.getPost(context.post_id, { as_user_id: context.user_id });
    if (mention) addNames(names, mention);
  }
  var earlier = [];
  if (mention && !context.private_message && EARLIER_POSTS > 0) {
    earlier = earlierPosts(mention, names);
  }
  var asked = scrub(question, names).slice(0, QUESTION_CHARS);
  return earlier.concat([{ role: "user", content: asked }]);
}

function earlierPosts(mention, names) {
  if (!isPublic(mention.topic)) return [];
  var wanted = [1]; // the opening post, then the ones just before the mention
  for (var n = Math.max(2, mention.post_number - EARLIER_POSTS + 1); n < mention.post_number; n++) {
    wanted.push(n);
  }
  wanted = wanted.filter(function (n) { return n < mention.post_number; });
  if (wanted.length === 0) return [];
  var posts = discourse.getTopicPosts(context.topic_id, { as_user_id: context.user_id,
                                                          post_numbers: wanted });
  posts.forEach(function (post) { addNames(names, post); });
  return posts
    .filter(function (post) { return post.post_type === 1 && String(post.raw || "").trim(); })
    .map(function (post) {
      return {
        role: post.user_id > 0 ? "user" : "assistant", // bots (the agent) have ids below 1
        content: scrub(String(post.raw), names).slice(0, POST_CHARS),
      };
    });
}

// Public: listed, not a PM, and in a category an anonymous visitor can list (filterTopics reads
// as one). Anything unclear counts as private, and then only the question is sent.
function isPublic(topic) {
  if (!topic || topic.archetype !== "regular" || topic.visible === false) return false;
  var full = discourse.getTopic(topic.id);
  if (!full || !full.category_slug) return false;
  var listed = discourse.filterTopics({ q: "category:" + full.category_slug, limit: 100 });
  return !!(listed && listed.topics && listed.topics.some(function (t) {
    return t.category_id === full.category_id;
  }));
}

// --- names out --------------------------------------------------------------------------------

function knownNames() {
  var names = [];
  if (context.username) names.push(String(context.username));
  String(context.participants || "").split(",").forEach(function (name) {
    if (name.trim()) names.push(name.trim());
  });
  return names;
}

function addNames(names, post) {
  [post.username, post.display_username].forEach(function (name) {
    if (name) names.push(String(name));
  });
  // A full name ("Ada Lovelace") is taken out too; a single word could be any word of the text.
  if (post.name && /\s/.test(String(post.name).trim())) names.push(String(post.name).trim());
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function scrub(text, names) {
  var out = String(text)
    .replace(/\[quote=[^\]]*\]/gi, "[quote]") // quote attributions name their author
    .replace(/(^|[^\w@])@[\w.\-]+/g, "$1@someone"); // mentions
  names.forEach(function (name) {
    if (name.length < 2) return;
    out = out.replace(new RegExp("(^|[^\\w])" + escapeRegExp(name) + "(?![\\w])", "gi"),
                      "$1someone");
  });
  return out;
}
