// The tool runner's JavaScript side, as discourse-ai builds it (plugins/discourse-ai/lib/agents/
// tool_runner.rb, framework_script): the same globals (http, llm, chain, secrets, crypto,
// discourse, context, a default details()), each calling a host function of the runner. In
// Discourse the host functions are Ruby procs attached to the MiniRacer context and called
// synchronously; here they are answered by Python (tests/discourse/harness.py) through a shared
// buffer: the script writes its call, blocks on Atomics.wait until Python has written the answer,
// and reads it back, so every call stays synchronous as the tool scripts expect. A host error
// comes back as a thrown Error, as a Ruby exception raised in an attached function does.
const __host = (function () {
  const sab = new SharedArrayBuffer(16 + 2 * __BRIDGE_CHARS__);
  const state = new Int32Array(sab, 0, 4); // [0]: 0 script, 1 call waiting, 2 answer ready; [1]: length
  const data = new Uint16Array(sab, 16);
  globalThis.__takeBuffer = function () {
    delete globalThis.__takeBuffer;
    return sab;
  };
  return function (fn, args) {
    const text = JSON.stringify({ fn: fn, args: args });
    if (text.length > data.length) throw new Error("harness: call larger than the bridge");
    for (let i = 0; i < text.length; i++) data[i] = text.charCodeAt(i);
    Atomics.store(state, 1, text.length);
    Atomics.store(state, 0, 1);
    while (Atomics.load(state, 0) !== 2) Atomics.wait(state, 0, 1, 1);
    const n = Atomics.load(state, 1);
    let out = "";
    for (let i = 0; i < n; i += 4096) {
      out += String.fromCharCode.apply(null, data.subarray(i, Math.min(n, i + 4096)));
    }
    Atomics.store(state, 0, 0);
    const reply = JSON.parse(out);
    if (reply.error !== undefined) throw new Error(reply.error);
    return reply.value;
  };
})();

function __attach(name) {
  return function () {
    return __host(name, Array.prototype.slice.call(arguments));
  };
}

const _http_get = __attach("http_get");
const _http_post = __attach("http_post");
const _http_put = __attach("http_put");
const _http_patch = __attach("http_patch");
const _http_delete = __attach("http_delete");
const _llm_truncate = __attach("llm_truncate");
const _llm_generate = __attach("llm_generate");
const _chain_set_custom_raw = __attach("chain_set_custom_raw");
const _chain_stream_custom_raw = __attach("chain_stream_custom_raw");
const _secrets_get = __attach("secrets_get");
const _crypto_hmac_sha256_hex = __attach("crypto_hmac_sha256_hex");
const _crypto_sha256_hex = __attach("crypto_sha256_hex");
const _crypto_base64_encode = __attach("crypto_base64_encode");
const _discourse_get_post = __attach("discourse_get_post");
const _discourse_get_topic = __attach("discourse_get_topic");
const _discourse_get_topic_posts = __attach("discourse_get_topic_posts");
const _discourse_filter_topics = __attach("discourse_filter_topics");
const _discourse_create_post = __attach("discourse_create_post");
const _discourse_get_custom_field = __attach("discourse_get_custom_field");
const _discourse_set_custom_field = __attach("discourse_set_custom_field");

// Reads report a bad option as {"__discourse_read_error": message}; Discourse's wrappers throw it.
function __read(fn) {
  return function () {
    const result = fn.apply(null, arguments);
    if (result && typeof result === "object" && result.__discourse_read_error !== undefined) {
      throw new Error(result.__discourse_read_error);
    }
    return result;
  };
}

function __body(options) {
  // "body (string | Object): Request body. If an object, it's stringified as JSON."
  if (options && options.body !== undefined && options.body !== null && typeof options.body !== "string") {
    return Object.assign({}, options, { body: JSON.stringify(options.body) });
  }
  return options;
}

const http = {
  get: function (url, options) { return _http_get(url, options); },
  post: function (url, options) { return _http_post(url, __body(options)); },
  put: function (url, options) { return _http_put(url, __body(options)); },
  patch: function (url, options) { return _http_patch(url, __body(options)); },
  delete: function (url, options) { return _http_delete(url, __body(options)); },
};

const llm = {
  truncate: _llm_truncate,
  generate: function (prompt, options) {
    const result = _llm_generate(prompt, options);
    if (options && options.json) {
      try {
        return JSON.parse(result);
      } catch (e) {
        return result;
      }
    }
    return result;
  },
};

const chain = {
  setCustomRaw: _chain_set_custom_raw,
  streamCustomRaw: _chain_stream_custom_raw,
};

const secrets = {
  get: function (aliasName) { return _secrets_get(aliasName); },
};

const crypto = {
  hmacSha256: function (key, data) { return _crypto_hmac_sha256_hex(key, data); },
  sha256: function (data) { return _crypto_sha256_hex(data); },
  base64Encode: function (text) { return _crypto_base64_encode(text); },
};

const discourse = {
  baseUrl: __BASE_URL__,
  getPost: __read(_discourse_get_post),
  getTopic: __read(_discourse_get_topic),
  getTopicPosts: __read(_discourse_get_topic_posts),
  filterTopics: __read(_discourse_filter_topics),
  createPost: function (params) {
    const result = _discourse_create_post(params);
    if (result.error) throw new Error(result.error);
    return result;
  },
  getCustomField: function (type, id, key) {
    const result = _discourse_get_custom_field(type, id, key);
    if (result && result.error) throw new Error(result.error);
    return result;
  },
  setCustomField: function (type, id, key, value) {
    const result = _discourse_set_custom_field(type, id, key, value);
    if (result.error) throw new Error(result.error);
    return result;
  },
};

const context = __CONTEXT__;

function details() { return ""; }
