// Entry of dist/cohort.min.js: one script tag gives window.Cohort = {Client}.
import { Client } from "./client";

(globalThis as any).Cohort = { Client };
