import type { FastifyInstance } from 'fastify';
import { pixAccountRoutes } from './pix-accounts.ts';
import { pixChargeRoutes, pixTestPaymentRoute } from './pix-charges.ts';
import { pixKeyRoutes } from './pix-keys.ts';
import { pixNotificationRoutes, pixReceivementRoutes } from './pix-receivements.ts';
import type { AppDeps } from './route.ts';

// Pix: partner accounts and funding sources, keys, charges, receivements, and
// the PSP's notifications (in their own scope: they keep the raw body).

export async function pixRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  await pixAccountRoutes(app, deps);
  await pixKeyRoutes(app, deps);
  await pixChargeRoutes(app, deps);
  await pixTestPaymentRoute(app, deps);
  await pixReceivementRoutes(app, deps);
  await app.register(async (scope) => pixNotificationRoutes(scope, deps));
}
