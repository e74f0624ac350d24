// The message box: a typed turn is a user input_text item, then response.create.

import { newItemId, send } from './channel.js';
import { $ } from './dom.js';
import { addTypedLine } from './conversation.js';

/** Submit of the message form. */
export function sendText(e) {
  e.preventDefault();
  const input = $('text-input');
  const text = input.value.trim();
  if (!text) return;
  // The page names the item, so that the server's events about it find its line.
  const itemId = newItemId();
  const ok = send({
    type: 'conversation.item.create',
    item: { id: itemId, type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
  }) && send({ type: 'response.create' });
  if (!ok) return;
  addTypedLine(text, itemId);
  input.value = '';
}
