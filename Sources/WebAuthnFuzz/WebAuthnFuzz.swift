import WebAuthn
