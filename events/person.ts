import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of a person's dashboard access (stream `person-<user_id>`): sign-ins,
// sign-outs and passkeys. No code, cookie or session secret is ever recorded:
// `session_id` is the session's public id (the cookie carries a different,
// random secret whose hash alone is kept, outside the log).

export const UserSignedIn = z.object({
  user_id: z.string(),
  session_id: z.string(),
  method: z.enum(['code', 'passkey']),
  passkey_id: z.string().nullable(),
  signed_in_at: IsoTime,
});

export const UserSignedOut = z.object({
  user_id: z.string(),
  session_id: z.string(),
  /** Every session of the person was closed (sign out everywhere). */
  everywhere: z.boolean(),
  signed_out_at: IsoTime,
});

/** A passkey's public key (COSE, base64url) and credential id: public parts only. */
export const UserPasskeyAdded = z.object({
  user_id: z.string(),
  passkey_id: z.string(),
  credential_id: z.string(),
  public_key: z.string(),
  counter: z.number().int().nonnegative(),
  transports: z.array(z.string()),
  name: z.string(),
  added_at: IsoTime,
});

export const UserPasskeyRemoved = z.object({
  user_id: z.string(),
  passkey_id: z.string(),
});

export const personEvents = {
  'user.signed_in': UserSignedIn,
  'user.signed_out': UserSignedOut,
  'user.passkey_added': UserPasskeyAdded,
  'user.passkey_removed': UserPasskeyRemoved,
} as const;
