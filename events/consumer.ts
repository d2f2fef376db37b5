import { z } from 'zod';
import { IsoTime } from './common.ts';

// Facts of a consumer (titular), stream `consumer-<id>`.

export const TaxType = z.enum(['PJ', 'MEI', 'ME', 'PF']);

export const ConsumerCreated = z.object({
  consumer_id: z.string(),
  org_id: z.string(),
  project_id: z.string(),
  display_name: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()),
  created_at: IsoTime,
});

export const ConsumerUpdated = z.object({
  consumer_id: z.string(),
  display_name: z.string().nullable().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  tax_type: TaxType.optional(),
});

export const consumerEvents = {
  'consumer.created': ConsumerCreated,
  'consumer.updated': ConsumerUpdated,
} as const;
