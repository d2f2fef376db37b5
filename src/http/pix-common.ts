import { z } from 'zod';

// What the Pix routes share besides their use cases (src/usecases/pix-common.ts): the consumer's path parameter.

export const ConsumerParams = z.object({ consumerId: z.string().min(1).max(200) });
