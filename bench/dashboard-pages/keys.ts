import type { PageCase } from '../dashboard-world.ts';

// The API keys page: an organization's keys are few (a key per service that
// calls us), and both the page and GET /v1/api-keys list them all, so this
// case seeds 50, not the bench's ROWS.
export default {
  name: 'API keys',
  table: 'api_keys',
  rows: 50,
  async seed(world, org, rows) {
    await world.many('API keys', rows - 1, (i) => org.post('/v1/api-keys', { name: `key ${i}`, environment: 'test' }, org.svc), 4);
    return { page: '/dashboard/keys', api: '/v1/api-keys', apiHeaders: org.svc };
  },
  pageRows: (html) => (html.match(/\/revoke"/g) ?? []).length,
  apiRows: (json) => json.api_keys.length,
} satisfies PageCase;
