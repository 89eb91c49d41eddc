#!/usr/bin/env node
// A small read-only filesystem MCP server (stdio), for agents that read code: list_directory,
// read_file and search_text, confined to the root directory given as the first argument (default:
// the current directory). Paths that leave the root, symlinks out of it, and big files are refused.
//
//   node examples/tools/fsServer.mjs ./src
//
// Built with the official MCP SDK; use @modelcontextprotocol/server-filesystem instead if you have it.
import { lstat, readdir, readFile, realpath } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import process from 'node:process';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const MAX_FILE_BYTES = 256 * 1024;
const MAX_ENTRIES = 500;
const MAX_MATCHES = 100;
const root = await realpath(resolve(process.argv[2] ?? '.'));

/** Resolves a path given by the model inside the root, or throws. */
async function inside(path) {
  const full = await realpath(resolve(root, path)).catch(() => {
    throw new Error(`no such file or directory: ${path}`);
  });
  if (full !== root && !full.startsWith(root + sep))
    throw new Error(`${path} is outside the allowed directory`);
  return full;
}

const text = (value) => ({ content: [{ type: 'text', text: value }] });
const failure = (err) => ({ content: [{ type: 'text', text: err.message }], isError: true });

const server = new McpServer({ name: 'amf-example-fs', version: '1.0.0' });

server.registerTool(
  'list_directory',
  {
    description: 'Lists a directory (relative to the root): one entry per line, directories end with "/"',
    inputSchema: { path: z.string().default('.') },
  },
  async ({ path }) => {
    try {
      const entries = await readdir(await inside(path), { withFileTypes: true });
      const lines = entries
        .slice(0, MAX_ENTRIES)
        .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
        .sort();
      return text(lines.join('\n') || '(empty)');
    } catch (err) {
      return failure(err);
    }
  },
);

server.registerTool(
  'read_file',
  {
    description: `Reads a UTF-8 text file (relative to the root), at most ${MAX_FILE_BYTES} bytes, with line numbers`,
    inputSchema: { path: z.string() },
  },
  async ({ path }) => {
    try {
      const full = await inside(path);
      const st = await lstat(full);
      if (!st.isFile()) throw new Error(`${path} is not a file`);
      if (st.size > MAX_FILE_BYTES)
        throw new Error(`${path} is ${st.size} bytes; the limit is ${MAX_FILE_BYTES}`);
      const lines = (await readFile(full, 'utf8')).split('\n');
      return text(lines.map((l, i) => `${String(i + 1).padStart(4)}  ${l}`).join('\n'));
    } catch (err) {
      return failure(err);
    }
  },
);

server.registerTool(
  'search_text',
  {
    description: 'Finds lines containing a plain text (case-insensitive) in the files under a directory',
    inputSchema: { text: z.string().min(1).max(200), path: z.string().default('.') },
  },
  async ({ text: needle, path }) => {
    try {
      const matches = [];
      const lower = needle.toLowerCase();
      const walk = async (dir) => {
        for (const e of await readdir(dir, { withFileTypes: true })) {
          if (matches.length >= MAX_MATCHES || e.name === 'node_modules' || e.name.startsWith('.')) continue;
          const full = join(dir, e.name);
          if (e.isDirectory()) await walk(full);
          else if (e.isFile() && (await lstat(full)).size <= MAX_FILE_BYTES) {
            const lines = (await readFile(full, 'utf8')).split('\n');
            lines.forEach((l, i) => {
              if (matches.length < MAX_MATCHES && l.toLowerCase().includes(lower))
                matches.push(`${relative(root, full)}:${i + 1}: ${l.trim().slice(0, 200)}`);
            });
          }
        }
      };
      await walk(await inside(path));
      return text(matches.join('\n') || 'no matches');
    } catch (err) {
      return failure(err);
    }
  },
);

await server.connect(new StdioServerTransport());
