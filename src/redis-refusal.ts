import { certificateRefusal } from './tls.js';

/**
 * Why Redis refused who we are (a wrong password, an ACL that forbids a command or key fencekit
 * uses, a certificate), or undefined when the error is not a refusal. Retrying does not help.
 */
export function redisRefusal(error: unknown): string | undefined {
  const message = String((error as { message?: unknown } | null)?.message ?? '');
  if (message.startsWith('WRONGPASS')) return 'the user name or password was refused';
  if (message.startsWith('NOAUTH')) return 'the server requires a user name and password';
  if (message.startsWith('NOPERM') || /user executing the script can't run this command/i.test(message))
    return "the user's ACL does not allow a command, key or channel fencekit uses (docs/security.md)";
  if (/AUTH.*(no password is set|without any password configured)/i.test(message))
    return 'a password was given, but the server has none set';
  return certificateRefusal(error);
}
