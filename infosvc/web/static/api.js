// Reading the API from the page: JSON, with the read token when the user gave one.
//
// The page itself is public; the data is not always (service.read_token_required). A token pasted
// into the page is kept in sessionStorage, so it lasts as long as the tab and is never written to
// disk or sent anywhere but as this origin's Authorization header.

const TOKEN_KEY = "infosvc.read_token";
const TIMEOUT_MS = 15000;

/** A refusal or a failure, with the API's own message; status 0 when the server was not reached. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;  // storage disabled: the token lasts until the page is left
  }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // nothing to keep it in; the next read asks again
  }
}

/** GET a path of the API as JSON; an ApiError for anything but a 2xx. */
export async function getJSON(path) {
  const headers = {Accept: "application/json"};
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  let response;
  try {
    response = await fetch(path, {headers, cache: "no-store", credentials: "omit",
                                  signal: AbortSignal.timeout(TIMEOUT_MS)});
  } catch (error) {
    const why = error?.name === "TimeoutError" ? `no answer within ${TIMEOUT_MS / 1000} s` : "cannot reach the server";
    throw new ApiError(0, `${why} (GET ${path})`);
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();  // every refusal of the API is {"error", "detail"}
      if (body?.error) message = `${response.status}: ${body.error}`;
    } catch {
      // not the API's JSON: a proxy's page, say; the status is all there is
    }
    throw new ApiError(response.status, `${message} (GET ${path})`);
  }
  return response.json();
}
