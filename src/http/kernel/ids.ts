// Resource ids live below the HTTP layer (src/ids.ts); routes import them from here.
export * from '../../ids.ts';
