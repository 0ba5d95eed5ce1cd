// The sign-in page: POST /login checks the token and sets the HttpOnly session cookie; the
// script never keeps the token.

const form = document.getElementById("login");
const error = document.getElementById("error");

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  error.hidden = true;
  const token = form.token.value.trim();
  const resp = await fetch("/login", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    credentials: "same-origin",
    body: JSON.stringify({ token }),
  });
  if (resp.status === 204) {
    window.location.replace("/" + window.location.hash); // back to the page that sent us here
    return;
  }
  let message = "That token is not valid.";
  try {
    const body = await resp.json();
    if (resp.status !== 401 && body.error) message = body.error.message;
  } catch { /* keep the default */ }
  error.textContent = message;
  error.hidden = false;
  form.token.select();
});
