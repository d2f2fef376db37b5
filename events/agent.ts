import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of an agent identity (stream `agent-<org_id>.<handle>`). Public keys
// only: each private key is in the vault and the event names its reference.

export const AgentRegistered = z.object({
  agent_id: z.string(),
  did: z.string(),
  principal_ref: z.string(),
  display_name: z.string().nullable(),
  kid: z.string(),
  ordinal: z.number().int().positive(),
  pubkey: z.string(),
  private_key_ref: z.string(),
  registered_at: IsoTime,
});

export const AgentKeyRotated = z.object({
  agent_id: z.string(),
  kid: z.string(),
  ordinal: z.number().int().positive(),
  pubkey: z.string(),
  private_key_ref: z.string(),
  retired_kid: z.string(),
  rotated_at: IsoTime,
});

export const AgentKeyRevoked = z.object({
  agent_id: z.string(),
  kid: z.string(),
  revoked_at: IsoTime,
});

export const AgentRevoked = z.object({
  agent_id: z.string(),
  did: z.string(),
  revoked_kids: z.array(z.string()),
  revoked_at: IsoTime,
});

export const agentEvents = {
  'agent.registered': AgentRegistered,
  'agent.key_rotated': AgentKeyRotated,
  'agent.key_revoked': AgentKeyRevoked,
  'agent.revoked': AgentRevoked,
} as const;
