// glassbox-react: the Glassbox chat in React apps. `useGlassboxChat` for a chat you draw yourself,
// `<GlassboxChat>` for the widget with its own view. React 18 and 19.
export { useGlassboxChat } from './useGlassboxChat.js';
export type { GlassboxChat as GlassboxChatState } from './useGlassboxChat.js';
export { GlassboxChat } from './GlassboxChat.js';
export type { GlassboxChatProps } from './GlassboxChat.js';
export { configureGlassbox } from './store.js';
export type { ChatOptions, ChatState, ChatStatus, Message } from './store.js';
export type {
  Attachment,
  ChatMessage,
  GlassboxErrorDetail,
  PageContext,
  Receipt,
  Usage,
} from 'glassbox-chat';
