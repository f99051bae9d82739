// Calls to the Memora API with the session's API key (sessionStorage, sent as Bearer).

const KEY = "memora.apiKey";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const apiKey = {
  get: () => sessionStorage.getItem(KEY) || "",
  set: (key) => (key ? sessionStorage.setItem(KEY, key) : sessionStorage.removeItem(KEY)),
};

let askForKey = async () => false; // replaced by the UI: shows the key dialog

export function onKeyNeeded(handler) {
  askForKey = handler;
}

export async function api(path, { method = "GET", body, params, retryOnAuth = true } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(params || {})) {
    for (const v of [].concat(value)) {
      if (v !== undefined && v !== null && v !== "") url.searchParams.append(name, v);
    }
  }
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const key = apiKey.get();
  if (key) headers.Authorization = `Bearer ${key}`;
  const response = await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (response.ok) return data;
  const error = data.error || {};
  if (response.status === 401 && retryOnAuth && (await askForKey(error.message))) {
    return api(path, { method, body, params, retryOnAuth: false });
  }
  throw new ApiError(response.status, error.code || "error", error.message || response.statusText);
}
