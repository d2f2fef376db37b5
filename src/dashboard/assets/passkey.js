// Passkeys in the browser (registration and sign-in); filled in with the passkey pages.
