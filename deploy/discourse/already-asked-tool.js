/*
 * "Already asked?" for a stock Discourse: a discourse-ai custom tool, run by the automation
 * script "ai_tool_action" on the trigger "Post created/edited" (docs/discourse.md).
 *
 * On the first post of a new public topic it asks the forum sidecar (POST /v1/similar) which
 * topics may already answer it and, when some are close enough, replies once with links to the
 * posts that answer them. It stays silent when the sidecar is unsure (its "silent": true), on any
 * error, in a private message, for a bot, and once the topic has a reply. It remembers that it
 * replied (a custom field on the topic), so editing the post never makes it reply twice.
 *
 * Tool parameters: none. Secrets (AI credentials bound to these aliases in the tool's editor):
 *   sidecar_url      the sidecar's address as Discourse reaches it, e.g. https://sidecar.example.org
 *   sidecar_api_key  SIDECAR_API_KEY
 * What the sidecar receives: the topic's title and first post, nothing about who wrote them.
 */

// --- settings ---------------------------------------------------------------------------------
var SHOW = 3; // topics listed at most (1..9)
var BODY_CHARS = 6000; // the first post is cut to this many characters before it is sent
var REPLY_AS = null; // a username to reply as (e.g. a bot account); null: the automation's user
var INTRO = "This question may already have an answer:";
var OUTRO = "If one of these answers it, a link back here helps the next reader.";
var FIELD = "sidecar_already_asked"; // the topic custom field that says it replied
// -----------------------------------------------------------------------------------------------

var outcome = "not run";

function invoke(params) {
  var result;
  try {
    result = alreadyAsked();
  } catch (e) {
    // Silent on error: nothing is posted, and the error stays in the tool's result only.
    result = { replied: false, reason: "error" };
  }
  outcome = result.reason || (result.replied ? "replied" : "silent");
  return result;
}

function details() {
  return "Already asked? " + outcome;
}

function skip(reason) {
  return { replied: false, reason: reason };
}

function alreadyAsked() {
  if (!context.post_id || !context.topic_id) return skip("no post");
  if (context.private_message) return skip("private message");
  if (!(context.user_id > 0)) return skip("written by a bot"); // bots and system: ids below 1
  var post = discourse.getPost(context.post_id);
  if (!post || post.post_number !== 1 || post.post_type !== 1) return skip("not a first post");
  var topic = post.topic || {};
  if (topic.archetype === "private_message") return skip("private message");
  if (topic.posts_count > 1 || topic.highest_post_number > 1) return skip("topic has replies");
  if (discourse.getCustomField("topic", context.topic_id, FIELD)) return skip("already replied");
  if (!isPublic(context.topic_id)) return skip("not a public topic");

  var found = similar(topic.title, post.raw);
  if (!found) return skip("sidecar error");
  if (found.silent || !found.results || found.results.length === 0) return skip("silent");
  var shown = found.results
    .filter(function (hit) { return hit.topic_id !== context.topic_id && link(hit); })
    .slice(0, SHOW);
  if (shown.length === 0) return skip("silent");

  // Claimed before posting: a second run (an edit right after) finds the field and stays quiet.
  discourse.setCustomField("topic", context.topic_id, FIELD, "replying");
  var params = { topic_id: context.topic_id, raw: reply(shown), reply_to_post_number: 1 };
  if (REPLY_AS) params.username = REPLY_AS;
  var created = discourse.createPost(params);
  discourse.setCustomField("topic", context.topic_id, FIELD, String(created.post_id));
  return {
    replied: true,
    topics: shown.map(function (hit) { return hit.topic_id; }),
  };
}

// A topic anyone may read: listed, not a PM, and in a category an anonymous visitor can list
// (filterTopics reads as an anonymous visitor). Anything unclear counts as not public.
function isPublic(topicId) {
  var topic = discourse.getTopic(topicId);
  if (!topic || topic.archetype !== "regular" || topic.visible === false) return false;
  if (!topic.category_slug) return false;
  var listed = discourse.filterTopics({ q: "category:" + topic.category_slug, limit: 100 });
  return !!(listed && listed.topics && listed.topics.some(function (t) {
    return t.category_id === topic.category_id;
  }));
}

function similar(title, raw) {
  var base = String(secrets.get("sidecar_url")).replace(/\/+$/, "");
  var response = http.post(base + "/v1/similar", {
    headers: {
      Authorization: "Bearer " + secrets.get("sidecar_api_key"),
      "Content-Type": "application/json",
    },
    body: {
      title: String(title || "").slice(0, 500),
      raw: String(raw || "").slice(0, BODY_CHARS),
      limit: Math.min(10, SHOW + 1), // one more: the new topic may already be indexed
    },
  });
  if (response.status !== 200) return null;
  return JSON.parse(response.body);
}

function link(hit) {
  var title = String(hit.title || "a topic").replace(/[\[\]\\]/g, "");
  var url = String(hit.url || hit.topic_url || "");
  if (!/^(https?:\/\/|\/)[^\s()]*$/.test(url)) return null; // only plain post links
  return "- [" + title + "](" + url + ")";
}

function reply(hits) {
  return [INTRO, ""].concat(hits.map(link)).concat(["", OUTRO]).join("\n");
}
